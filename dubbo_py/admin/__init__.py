"""dubbo-py admin."""
