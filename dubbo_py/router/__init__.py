"""dubbo-py router."""
