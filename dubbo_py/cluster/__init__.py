"""dubbo-py cluster."""
