"""The kinds of inputs and the readers (a placeholder in this branch: see ``readers``)."""
