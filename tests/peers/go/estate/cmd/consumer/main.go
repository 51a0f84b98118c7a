// A dubbo-go 3.3 consumer of demo.Greeter over Triple with a ZooKeeper, etcd or Nacos registry, driven over
// stdin per the peers' contract: --registry zookeeper://host:port|etcd://host:port|
// nacos://host:port[?group=G] --application NAME
// [--version V] [--group G] [--timeout MS] [--timeout-level client|reference] [--call-timeout MS]
// [--discovery interface|instance] [--tls-ca PEM [--tls-cert PEM --tls-key PEM]]
// [--config-center zookeeper://host:port] (where dubbo-go reads routing rules and configurators;
// without it dubbo-go reads none) [--param k=v ...] (parameters of the reference's URL, which
// routers read as the consumer's).
// It prints READY, then one "RESULT {json}" line per command: "call N [name=X] [k=v ...]"
// (unary, k=v as attachments), "stream N [name=X]" (server stream), "collect N [name=X]"
// (client stream of N lines X#i), "echo N [name=X]" (bidi, N lines X#i) and "load N MS
// [name=X]" (N goroutines calling for MS ms, load.go); "quit" or end of
// stdin ends it. Messages longer than 64 KiB are cut there; "sizes" has their lengths.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"dubbo.apache.org/dubbo-go/v3"
	"dubbo.apache.org/dubbo-go/v3/client"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	"dubbo.apache.org/dubbo-go/v3/config_center"
	// dubbo-go's own affinity routers, which its imports package leaves out (as Dubbo Java's
	// SPI listing leaves out its affinity routers): without a rule they keep every provider.
	_ "dubbo.apache.org/dubbo-go/v3/cluster/router/affinity"
	_ "dubbo.apache.org/dubbo-go/v3/imports"
	"dubbo.apache.org/dubbo-go/v3/registry"

	"estate/demo"
	"estate/internal/args"
)

// describe is an error as a dubbo-go user sees it: its first line.
func describe(err error) string {
	text := err.Error()
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	return text
}

func main() {
	out := os.Stdout
	os.Stdout = os.Stderr
	a := args.Parse(os.Args[1:])
	timeout, _ := strconv.Atoi(a.Get("timeout", "3000"))
	registryOpts := a.Registry()
	switch a.Get("discovery", "interface") {
	case "interface":
		registryOpts = append(registryOpts, registry.WithRegisterInterface())
	case "instance":
		registryOpts = append(registryOpts, registry.WithRegisterService())
	default:
		fmt.Fprintln(os.Stderr, "--discovery: expected interface or instance")
		os.Exit(2)
	}
	instanceOpts := []dubbo.InstanceOption{
		dubbo.WithName(a.Require("application")),
		dubbo.WithRegistry(registryOpts...),
	}
	// --config-center: dubbo-go 3.3.2 starts no dynamic configuration from the registry alone
	// (Dubbo Java uses its registry as config center by default), so its routers and
	// configurators would never see a rule pushed to ZooKeeper.
	if cc := a.Get("config-center", ""); cc != "" {
		instanceOpts = append(instanceOpts, dubbo.WithConfigCenter(
			config_center.WithZookeeper(),
			config_center.WithAddress(strings.TrimPrefix(cc, "zookeeper://")),
		))
	}
	// --tls-ca PEM [--tls-cert PEM --tls-key PEM] [--tls-server-name N]: dubbo-go's TLS
	// config; its clients then dial every provider over TLS.
	if opts := a.TLS(); len(opts) > 0 {
		instanceOpts = append(instanceOpts, dubbo.WithTLS(opts...))
	}
	ins, err := dubbo.NewInstance(instanceOpts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dubbo.NewInstance:", err)
		os.Exit(1)
	}
	// --timeout-level: where --timeout is set. dubbo-go 3.3.2 applies only the client's
	// (WithClientRequestTimeout); a reference's WithRequestTimeout alone leaves the default 3 s.
	clientOpts := []client.ClientOption{client.WithClientProtocolTriple()}
	switch a.Get("timeout-level", "client") {
	case "client":
		clientOpts = append(clientOpts, client.WithClientRequestTimeout(time.Duration(timeout)*time.Millisecond))
	case "reference":
	default:
		fmt.Fprintln(os.Stderr, "--timeout-level: expected client or reference")
		os.Exit(2)
	}
	cli, err := ins.NewClient(clientOpts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewClient:", err)
		os.Exit(1)
	}
	// --call-timeout MS: a per-call deadline (client.WithCallRequestTimeout) besides the
	// reference's --timeout.
	var callOpts []client.CallOption
	if ms, _ := strconv.Atoi(a.Get("call-timeout", "0")); ms > 0 {
		callOpts = append(callOpts, client.WithCallRequestTimeout(time.Duration(ms)*time.Millisecond))
	}
	refOpts := []client.ReferenceOption{client.WithRequestTimeout(time.Duration(timeout) * time.Millisecond)}
	if v := a.Get("version", ""); v != "" {
		refOpts = append(refOpts, client.WithVersion(v))
	}
	if g := a.Get("group", ""); g != "" {
		refOpts = append(refOpts, client.WithGroup(g))
	}
	for _, kv := range a.All("param") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "--param %q: expected k=v\n", kv)
			os.Exit(2)
		}
		refOpts = append(refOpts, client.WithParam(k, v))
	}
	greeter, err := demo.NewGreeter(cli, refOpts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewGreeter:", err)
		os.Exit(1)
	}
	// demo.Chat without version or group, as the estate peers serve it.
	// Its own client: references made from one dubbo-go 3.3.2 client share the group and
	// version of the first (demo.Chat was looked up in the Greeter's group otherwise).
	chatCli, err := ins.NewClient(clientOpts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewClient:", err)
		os.Exit(1)
	}
	chat, err := demo.NewChat(chatCli, client.WithRequestTimeout(time.Duration(timeout)*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewChat:", err)
		os.Exit(1)
	}
	fmt.Fprintln(out, "READY")

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		words := strings.Fields(in.Text())
		if len(words) == 0 {
			continue
		}
		if words[0] == "quit" {
			break
		}
		n := 1
		if len(words) > 1 {
			n, _ = strconv.Atoi(words[1])
		}
		name := "go"
		attachments := map[string]interface{}{}
		for _, w := range words[min(2, len(words)):] {
			k, v, ok := strings.Cut(w, "=")
			if !ok {
				continue
			}
			if k == "name" {
				name = v
			} else {
				attachments[k] = v
			}
		}
		result := map[string]interface{}{}
		switch words[0] {
		case "call":
			ok := map[string]int{}
			errs := map[string]int{}
			messages := []string{}
			sizes := []int{}
			for i := 0; i < n; i++ {
				ctx := context.Background()
				if len(attachments) > 0 {
					ctx = context.WithValue(ctx, constant.AttachmentKey, attachments)
				}
				reply, err := greeter.SayHello(ctx, &demo.HelloRequest{Name: name}, callOpts...)
				if err != nil {
					errs[describe(err)]++
					continue
				}
				message := reply.GetMessage()
				key := message
				if c := strings.IndexByte(message, ':'); c >= 0 && !strings.HasPrefix(message, "{") {
					key = message[:c]
				}
				if len(message) > 65536 {
					key = fmt.Sprintf("<%d chars>", len(message))
				}
				ok[key]++
				if len(messages) < 3 {
					sizes = append(sizes, len(message))
					if len(message) > 65536 {
						message = message[:65536]
					}
					messages = append(messages, message)
				}
			}
			result["ok"], result["errors"], result["messages"], result["sizes"] = ok, errs, messages, sizes
		case "load":
			// load THREADS MILLIS [name=X] (load.go).
			millis := 3000
			if len(words) > 2 && !strings.Contains(words[2], "=") {
				millis, _ = strconv.Atoi(words[2])
			}
			result = load(greeter, n, millis, name)
		case "stream":
			messages := []string{}
			errs := []string{}
			stream, err := greeter.SayHelloStream(context.Background(), &demo.HelloRequest{Name: name, Count: int32(n)})
			if err != nil {
				errs = append(errs, describe(err))
			} else {
				for stream.Recv() {
					messages = append(messages, stream.Msg().GetMessage())
				}
				if err := stream.Err(); err != nil {
					errs = append(errs, describe(err))
				}
			}
			result["messages"], result["errors"] = messages, errs
		case "collect":
			errs := []string{}
			stream, err := chat.Collect(context.Background())
			if err == nil {
				for i := 0; i < n && err == nil; i++ {
					err = stream.Send(&demo.Line{Text: fmt.Sprintf("%s#%d", name, i)})
				}
			}
			if err == nil {
				var summary *demo.Summary
				if summary, err = stream.CloseAndRecv(); err == nil {
					result["count"], result["joined"], result["provider"] = summary.GetCount(), summary.GetJoined(), summary.GetProvider()
				}
			}
			if err != nil {
				errs = append(errs, describe(err))
			}
			result["errors"] = errs
		case "echo":
			messages := []string{}
			providers := map[string]int{}
			errs := []string{}
			stream, err := chat.Echo(context.Background())
			// Each line is sent and its echo read before the next: a bidi stream, not a batch.
			for i := 0; i < n && err == nil; i++ {
				if err = stream.Send(&demo.Line{Text: fmt.Sprintf("%s#%d", name, i)}); err != nil {
					break
				}
				var line *demo.Line
				if line, err = stream.Recv(); err == nil {
					messages = append(messages, line.GetText())
					providers[line.GetProvider()]++
				}
			}
			if err == nil {
				err = stream.CloseRequest()
			}
			if err == nil {
				if _, end := stream.Recv(); end != nil && !errors.Is(end, io.EOF) {
					err = end
				}
				stream.CloseResponse()
			}
			if err != nil {
				errs = append(errs, describe(err))
			}
			result["messages"], result["providers"], result["errors"] = messages, providers, errs
		default:
			result["errors"] = map[string]int{"unknown command " + words[0]: 1}
		}
		line, _ := json.Marshal(result)
		fmt.Fprintln(out, "RESULT "+string(line))
	}
	os.Exit(0)
}
