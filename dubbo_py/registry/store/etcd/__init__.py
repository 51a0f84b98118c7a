"""The etcd store (dubbo-go's etcdv3 key layout) and its gRPC API."""
