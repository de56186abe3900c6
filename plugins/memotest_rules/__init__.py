"""memotest adapter for Bazel-style BUILD files (``py_test``, ``sh_test``, ``test_suite``),
read with ``ast`` and never executed. ``docs/adapters/rules.md`` is the user's guide."""
