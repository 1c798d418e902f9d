#!/usr/bin/env python3
"""docs/strategy_checklist.py SOURCE_DIR

Holds every strategy to the list of places a strategy has (docs/design.md,
"Adding a strategy"), starting from the one list of event kinds,
RESILIENCE_EVENT_KINDS in include/resilience/event.hpp: each strategy named
there must have

  - event names of its own, each "on_..." and none twice;
  - its row in docs/metrics.md's table of strategy and event names, naming
    every one of its events, and no row for a strategy that does not exist;
  - a page (docs/strategies/, docs/http/ or docs/config.md) that names it as
    strategy_name="<strategy>", and its events named on such pages;
  - at least one misuse that must not compile, in tests/compile_fail/ (a
    file whose `// strategy:` line names it).

Prints what is missing and exits 1, or prints the strategies checked.
"""
import glob
import os
import re
import sys


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def main():
    source = sys.argv[1]
    header = read(os.path.join(source, "include/resilience/event.hpp"))
    kinds = re.findall(r'X\((\w+), "([^"]+)", "([^"]+)"\)', header)
    if len(kinds) < 10:
        sys.exit("event.hpp: RESILIENCE_EVENT_KINDS not found, or nearly empty")
    strategies = {}
    for _, name, strategy in kinds:
        strategies.setdefault(strategy, []).append(name)

    missing = []
    for strategy, names in strategies.items():
        for name in names:
            if not name.startswith("on_"):
                missing.append(f"{strategy}: event {name} is not named on_...")
        for name in set(names):
            if names.count(name) > 1:
                missing.append(f"{strategy}: event {name} twice")

    metrics = read(os.path.join(source, "docs/metrics.md"))
    rows = {}
    for line in metrics.splitlines():
        m = re.match(r"\| `(\w+)` \| (`on_.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    for strategy, names in strategies.items():
        row = rows.get(strategy)
        if row is None:
            missing.append(f"{strategy}: no row in docs/metrics.md's table of strategy and event names")
            continue
        for name in names:
            if f"`{name}`" not in row:
                missing.append(f"{strategy}: docs/metrics.md's row does not name {name}")
    for strategy in rows:
        if strategy not in strategies:
            missing.append(f"docs/metrics.md: a row for {strategy}, which event.hpp does not list")

    pages = {p: read(p) for p in glob.glob(os.path.join(source, "docs/strategies/*.md")) +
             glob.glob(os.path.join(source, "docs/http/*.md")) + [os.path.join(source, "docs/config.md")]}
    for strategy, names in strategies.items():
        own = [text for text in pages.values() if f'strategy_name="{strategy}"' in text]
        if not own:
            missing.append(f'{strategy}: no page in docs/strategies/, docs/http/ or docs/config.md names strategy_name="{strategy}"')
            continue
        for name in names:
            if not any(f"`{name}`" in text or f'"{name}"' in text for text in own):
                missing.append(f'{strategy}: no page naming strategy_name="{strategy}" names {name}')

    covered = set()
    for path in glob.glob(os.path.join(source, "tests/compile_fail/*.cpp")):
        for line in read(path).splitlines():
            if line.startswith("// strategy:"):
                covered.update(s.strip() for s in line[len("// strategy:"):].split(","))
    for strategy in strategies:
        if strategy not in covered:
            missing.append(f"{strategy}: no misuse in tests/compile_fail/ (a file with `// strategy: {strategy}`)")

    if missing:
        print("\n".join(missing))
        sys.exit(1)
    print("checked: " + ", ".join(sorted(strategies)))


if __name__ == "__main__":
    main()
