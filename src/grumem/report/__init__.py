"""What the report shows of a project: plots (matplotlib SVG bar charts) and the
trajectory viewer (one self-contained HTML page, built from the corpus and the log)."""
