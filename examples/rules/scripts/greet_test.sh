#!/bin/sh
# Runs from the workspace root, as a Bazel test runs from its runfiles root.
set -e
sh scripts/greet.sh memotest > "$TMPDIR/out.txt"
diff scripts/expected.txt "$TMPDIR/out.txt"
echo "greet_test: ok"
