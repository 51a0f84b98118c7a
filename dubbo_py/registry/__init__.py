"""dubbo-py registry."""
