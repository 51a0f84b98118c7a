"""Rule documents as operators handle them: parsing and validation, operations, history and
its diffs, lint, reach, access control, `route test` scenarios, override URLs and documents."""
