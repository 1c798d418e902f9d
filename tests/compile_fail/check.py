#!/usr/bin/env python3
"""compile_fail/check.py COMPILE_COMMANDS CONTROLS SOURCE

Compiles SOURCE with RESILIENCE_MISUSE defined, using the command the build
compiles CONTROLS with (same compiler, flags and definitions, front end
only), and passes when the compile fails with a diagnostic matching the
`// expect:` pattern of SOURCE's first line. Run by ctest, in parallel with
the other tests: it touches nothing in the build tree.
"""
import json
import re
import shlex
import subprocess
import sys


def main():
    commands, controls, source = sys.argv[1:4]
    with open(source) as f:
        first = f.readline()
    if not first.startswith("// expect: "):
        sys.exit(f"{source}:1: the first line must be `// expect: <pattern>`")
    expect = first[len("// expect: "):].strip()

    entry = next((e for e in json.load(open(commands)) if e["file"] == controls), None)
    if entry is None:
        sys.exit(f"{commands} has no command for {controls}")
    argv = shlex.split(entry["command"])
    out = argv.index("-o")
    del argv[out:out + 2]
    argv[argv.index(controls)] = source
    argv += ["-fsyntax-only", "-DRESILIENCE_MISUSE"]

    done = subprocess.run(argv, cwd=entry["directory"], capture_output=True, text=True)
    output = done.stdout + done.stderr
    if done.returncode == 0:
        sys.exit(f"{source}: compiled with RESILIENCE_MISUSE; it must not")
    if not re.search(expect, output):
        print(output)
        sys.exit(f"{source}: failed to compile, but no diagnostic matches `{expect}`")
    print(f"refused as expected: {expect}")


main()
