"""A tiny style check: no tabs, no trailing spaces, lines of at most 100 characters."""

import sys
from pathlib import Path

problems = 0
files = sorted(p for arg in sys.argv[1:] for p in Path(arg).rglob("*.py"))
for path in files:
    for no, line in enumerate(path.read_text().splitlines(), 1):
        for bad, why in (("\t" in line, "tab"), (line != line.rstrip(), "trailing space")):
            if bad:
                print(f"{path}:{no}: {why}")
                problems += 1
        if len(line) > 100:
            print(f"{path}:{no}: line longer than 100 characters")
            problems += 1
print(f"checked {len(files)} files, {problems} problems")
sys.exit(1 if problems else 0)
