package args

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"dubbo.apache.org/dubbo-go/v3/registry"
)

// Registry is --registry as dubbo-go registry options: zookeeper://host:port[,host:port] (its
// ZooKeeper registry), etcd://host:port[,host:port] (its etcdv3 registry, which also serves as
// its metadata report and config centre, as ZooKeeper does) or nacos://host:port[?group=G] (its
// Nacos registry; group is the registry's group, registry.WithGroup, which dubbo-go's Nacos
// registry uses as the Nacos naming group). Any other scheme, a path after the address
// (dubbo-go's registries have no chroot option), or a parameter other than a Nacos group exits
// naming the option.
func (a *Args) Registry() []registry.Option {
	value := a.Require("registry")
	scheme, rest, found := strings.Cut(value, "://")
	address, query, _ := strings.Cut(rest, "?")
	if !found || address == "" || strings.Contains(address, "/") {
		fmt.Fprintf(os.Stderr, "--registry %q: expected zookeeper://host:port, etcd://host:port or nacos://host:port\n", value)
		os.Exit(2)
	}
	params, err := url.ParseQuery(query)
	if err != nil || (query != "" && scheme != "nacos") {
		fmt.Fprintf(os.Stderr, "--registry %q: parameters are read on nacos:// only (group=G)\n", value)
		os.Exit(2)
	}
	switch scheme {
	case "zookeeper":
		return []registry.Option{registry.WithZookeeper(), registry.WithAddress(address)}
	case "etcd":
		return []registry.Option{registry.WithEtcdV3(), registry.WithAddress(address)}
	case "nacos":
		opts := []registry.Option{registry.WithNacos(), registry.WithAddress(address)}
		for key, values := range params {
			if key != "group" || len(values) != 1 || values[0] == "" {
				fmt.Fprintf(os.Stderr, "--registry %q: only one non-empty group=G is read\n", value)
				os.Exit(2)
			}
			opts = append(opts, registry.WithGroup(values[0]))
		}
		return opts
	}
	fmt.Fprintf(os.Stderr, "--registry %q: scheme %q is neither zookeeper, etcd nor nacos\n", value, scheme)
	os.Exit(2)
	return nil
}
