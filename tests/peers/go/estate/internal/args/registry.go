package args

import (
	"fmt"
	"os"
	"strings"

	"dubbo.apache.org/dubbo-go/v3/registry"
)

// Registry is --registry as dubbo-go registry options: zookeeper://host:port[,host:port] (its
// ZooKeeper registry) or etcd://host:port[,host:port] (its etcdv3 registry, which also serves as
// its metadata report and config centre, as ZooKeeper does). Any other scheme, or a path after
// the address (dubbo-go's registries have no chroot option), exits naming the option.
func (a *Args) Registry() []registry.Option {
	value := a.Require("registry")
	scheme, address, found := strings.Cut(value, "://")
	if !found || address == "" || strings.ContainsAny(address, "/?") {
		fmt.Fprintf(os.Stderr, "--registry %q: expected zookeeper://host:port or etcd://host:port\n", value)
		os.Exit(2)
	}
	switch scheme {
	case "zookeeper":
		return []registry.Option{registry.WithZookeeper(), registry.WithAddress(address)}
	case "etcd":
		return []registry.Option{registry.WithEtcdV3(), registry.WithAddress(address)}
	}
	fmt.Fprintf(os.Stderr, "--registry %q: scheme %q is neither zookeeper nor etcd\n", value, scheme)
	os.Exit(2)
	return nil
}
