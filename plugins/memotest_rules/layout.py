"""The file names that make a workspace: its BUILD files and the files marking its root
(a module of its own: the plugin looks for them on every command, the parser reads them)."""

BUILD_NAMES = ("BUILD.bazel", "BUILD")  # Bazel prefers BUILD.bazel when both exist
WORKSPACE_MARKERS = ("MODULE.bazel", "WORKSPACE.bazel", "WORKSPACE")
