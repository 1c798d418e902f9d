#!/usr/bin/env python3
"""compile_fail/check.py COMPILE_COMMANDS SOURCE ALONE=HEADER...

Compiles SOURCE twice on its own, with the command the build compiles an
ALONE with: each ALONE is an empty file whose precompiled header holds
HEADER (a library header such as resilience/pipeline.hpp), and the first
whose HEADER SOURCE's own library #includes reach is used, so that it adds
nothing SOURCE would not have included itself; if none is reached, the
compiles go without one.

First as it is (its control), which must compile; then with
RESILIENCE_MISUSE defined, which must fail with a diagnostic matching one
of the `// expect: <pattern>` lines that SOURCE begins with: one for each
compiler whose words differ (GCC names a deleted overload in its error,
Clang in the note after it), each the library's own words.

Both compiles are the front end's only (-fsyntax-only). Run by ctest, in
parallel with the other tests: it touches nothing in the build tree.
"""
import json
import os
import re
import shlex
import subprocess
import sys

LIBRARY_INCLUDE = re.compile(r'^\s*#\s*include\s*<(resilience/[^>]+)>', re.MULTILINE)


def command_for(commands, file):
    """The compile command of `file`, as a list, with its output dropped."""
    entry = next((e for e in commands if e["file"] == file), None)
    if entry is None:
        sys.exit(f"the compile commands have none for {file}")
    argv = shlex.split(entry["command"])
    out = argv.index("-o")
    del argv[out:out + 2]
    return argv, entry["directory"]


def include_dirs(argv):
    dirs = []
    for i, arg in enumerate(argv):
        if arg == "-I" and i + 1 < len(argv):
            dirs.append(argv[i + 1])
        elif arg.startswith("-I"):
            dirs.append(arg[2:])
    return dirs


def reaches(source, header, dirs):
    """Whether SOURCE's library #includes, followed through the library's
    headers (which include one another unconditionally), reach `header`."""
    seen = set()
    with open(source) as f:
        todo = LIBRARY_INCLUDE.findall(f.read())
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name == header:
            return True
        for d in dirs:
            path = os.path.join(d, name)
            if os.path.isfile(path):
                with open(path) as f:
                    todo += LIBRARY_INCLUDE.findall(f.read())
                break
    return False


def without_precompiled_header(argv):
    out = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "-include":
            skip = True
        elif arg != "-Winvalid-pch":
            out.append(arg)
    return out


def main():
    commands_file, source = sys.argv[1:3]
    alones = [a.split("=", 1) for a in sys.argv[3:]]  # (empty file, its precompiled header), best first
    expected = []
    with open(source) as f:
        for line in f:
            if not line.startswith("// expect: "):
                break
            expected.append(line[len("// expect: "):].strip())
    if not expected:
        sys.exit(f"{source}:1: the first line must be `// expect: <pattern>`")
    with open(commands_file) as f:
        commands = json.load(f)

    dirs = include_dirs(command_for(commands, alones[-1][0])[0])
    alone, header = next(((a, h) for a, h in alones if reaches(source, h, dirs)), (alones[-1][0], None))
    argv, directory = command_for(commands, alone)
    if header is None:
        argv = without_precompiled_header(argv)
    argv[argv.index(alone)] = source
    done = subprocess.run(argv + ["-fsyntax-only"], cwd=directory, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stdout + done.stderr)
        sys.exit(f"{source}: its control (without RESILIENCE_MISUSE) does not compile on its own")

    done = subprocess.run(argv + ["-fsyntax-only", "-DRESILIENCE_MISUSE"], cwd=directory, capture_output=True,
                          text=True)
    output = done.stdout + done.stderr
    if done.returncode == 0:
        sys.exit(f"{source}: compiled with RESILIENCE_MISUSE; it must not")
    matched = next((e for e in expected if re.search(e, output)), None)
    if matched is None:
        print(output)
        sys.exit(f"{source}: failed to compile, but no diagnostic matches " + " or ".join(f"`{e}`" for e in expected))
    print(f"compiles alone as it is; refused as expected: {matched}")


main()
