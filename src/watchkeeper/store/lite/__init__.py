"""The embedded store through the standard library's ``sqlite3``, for commands that start fast."""
