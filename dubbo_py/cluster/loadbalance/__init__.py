"""dubbo-py cluster loadbalance."""
