// A dubbo-go 3.3 consumer of demo.Greeter over Triple with a ZooKeeper registry, driven over
// stdin per the peers' contract: --registry zookeeper://host:port --application NAME
// [--version V] [--group G] [--timeout MS] [--discovery interface|instance].
// It prints READY, then one "RESULT {json}" line per command: "call N [name=X] [k=v ...]"
// (unary, k=v as attachments) and "stream N [name=X]"; "quit" or end of stdin ends it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"dubbo.apache.org/dubbo-go/v3"
	"dubbo.apache.org/dubbo-go/v3/client"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
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
	registryOpts := []registry.Option{
		registry.WithZookeeper(),
		registry.WithAddress(strings.TrimPrefix(a.Require("registry"), "zookeeper://")),
	}
	switch a.Get("discovery", "interface") {
	case "interface":
		registryOpts = append(registryOpts, registry.WithRegisterInterface())
	case "instance":
		registryOpts = append(registryOpts, registry.WithRegisterService())
	default:
		fmt.Fprintln(os.Stderr, "--discovery: expected interface or instance")
		os.Exit(2)
	}
	ins, err := dubbo.NewInstance(
		dubbo.WithName(a.Require("application")),
		dubbo.WithRegistry(registryOpts...),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dubbo.NewInstance:", err)
		os.Exit(1)
	}
	cli, err := ins.NewClient(client.WithClientProtocolTriple())
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewClient:", err)
		os.Exit(1)
	}
	refOpts := []client.ReferenceOption{client.WithRequestTimeout(time.Duration(timeout) * time.Millisecond)}
	if v := a.Get("version", ""); v != "" {
		refOpts = append(refOpts, client.WithVersion(v))
	}
	if g := a.Get("group", ""); g != "" {
		refOpts = append(refOpts, client.WithGroup(g))
	}
	greeter, err := demo.NewGreeter(cli, refOpts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewGreeter:", err)
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
			for i := 0; i < n; i++ {
				ctx := context.Background()
				if len(attachments) > 0 {
					ctx = context.WithValue(ctx, constant.AttachmentKey, attachments)
				}
				reply, err := greeter.SayHello(ctx, &demo.HelloRequest{Name: name})
				if err != nil {
					errs[describe(err)]++
					continue
				}
				message := reply.GetMessage()
				key := message
				if c := strings.IndexByte(message, ':'); c >= 0 && !strings.HasPrefix(message, "{") {
					key = message[:c]
				}
				ok[key]++
				if len(messages) < 3 {
					messages = append(messages, message)
				}
			}
			result["ok"], result["errors"], result["messages"] = ok, errs, messages
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
		default:
			result["errors"] = map[string]int{"unknown command " + words[0]: 1}
		}
		line, _ := json.Marshal(result)
		fmt.Fprintln(out, "RESULT "+string(line))
	}
	os.Exit(0)
}
