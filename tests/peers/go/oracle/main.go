// Command oracle answers dubbo-py's routing questions with dubbo-go 3.3.2's own routers and
// configurators.
//
// It speaks the line protocol of the Java router oracle (tests/peers/java/oracle): after a first
// line READY, one JSON case per line on stdin, one JSON answer per line on stdout. Kinds:
// "condition" (a v3.0 or v3.1 condition-router document, fed to dubbo-go's ServiceRouter or
// ApplicationRouter through Process, as its config-center listener is), "tag" (a tag-router
// document, or none for static tags, fed to the tag PriorityRouter under the key its Route reads)
// and "affinity" (a service affinity document). Answers: {"kept": [indexes]}; {"error": ...} when
// dubbo-go refuses the document (it logs the refusal and routes as if there were no rule: the log
// line is the refusal reported); {"panic": ...} when dubbo-go's code panics reading the document
// or routing the call (a real consumer would crash or lose the call). "configurator" (a
// configurators document) is answered {"urls": [parameters of each provider URL once
// configured]}: the document goes through the config center's default parser (ParseToUrls) and
// registry.ToConfigurators with the default configurator (the override configurator), as a
// consumer's configuration listener reads it, and each provider URL through every configurator
// in order, as the registry directory's overrideUrl does; {"error": ...} when the parser refuses
// the document (the consumer logs it and keeps no configurator). Logs go to stderr only.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
)

import (
	"github.com/dubbogo/gost/log/logger"
)

import (
	"dubbo.apache.org/dubbo-go/v3/cluster/router"
	"dubbo.apache.org/dubbo-go/v3/cluster/router/affinity"
	"dubbo.apache.org/dubbo-go/v3/cluster/router/condition"
	"dubbo.apache.org/dubbo-go/v3/cluster/router/tag"
	"dubbo.apache.org/dubbo-go/v3/common"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	"dubbo.apache.org/dubbo-go/v3/common/extension"
	"dubbo.apache.org/dubbo-go/v3/config_center"
	_ "dubbo.apache.org/dubbo-go/v3/config_center/configurator" // registers the override configurator
	"dubbo.apache.org/dubbo-go/v3/config_center/parser"
	"dubbo.apache.org/dubbo-go/v3/protocol/base"
	"dubbo.apache.org/dubbo-go/v3/protocol/invocation"
	"dubbo.apache.org/dubbo-go/v3/registry"
	"dubbo.apache.org/dubbo-go/v3/remoting"
)

type call struct {
	Method      string         `json:"method"`
	Arguments   []any          `json:"arguments"`
	Attachments map[string]any `json:"attachments"`
}

type request struct {
	ID         any      `json:"id,omitempty"`
	Kind       string   `json:"kind"`
	Rule       string   `json:"rule"`
	Scope      string   `json:"scope"`
	Consumer   string   `json:"consumer"`
	Providers  []string `json:"providers"`
	Invocation *call    `json:"invocation"`
}

type answer map[string]any

// recorder is dubbo-go's logger while a case runs: warnings and errors are kept, so that a
// document dubbo-go refuses (it only logs) is reported as refused.
type recorder struct{ lines []string }

func (r *recorder) keep(level, text string) { r.lines = append(r.lines, level+" "+text) }

func (r *recorder) Info(args ...any)                  {}
func (r *recorder) Debug(args ...any)                 {}
func (r *recorder) Infof(format string, args ...any)  {}
func (r *recorder) Debugf(format string, args ...any) {}
func (r *recorder) Warn(args ...any)                  { r.keep("WARN", fmt.Sprint(args...)) }
func (r *recorder) Error(args ...any)                 { r.keep("ERROR", fmt.Sprint(args...)) }
func (r *recorder) Fatal(args ...any)                 { r.keep("FATAL", fmt.Sprint(args...)) }
func (r *recorder) Warnf(format string, args ...any)  { r.keep("WARN", fmt.Sprintf(format, args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.keep("ERROR", fmt.Sprintf(format, args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.keep("FATAL", fmt.Sprintf(format, args...)) }

// refusal is the first kept line that starts with one of prefixes, or "".
func (r *recorder) refusal(prefixes ...string) string {
	for _, line := range r.lines {
		for _, prefix := range prefixes {
			if strings.HasPrefix(line, prefix) {
				return line
			}
		}
	}
	return ""
}

var log = &recorder{}

// listener is what each router is to its config center.
type listener interface {
	Process(event *config_center.ConfigChangeEvent)
}

func main() {
	// Keep fd 1 for answers; anything dubbo-go prints (fmt.Println in places) goes to stderr.
	answers, err := syscall.Dup(1)
	if err != nil {
		panic(err)
	}
	if err := syscall.Dup3(2, 1, 0); err != nil {
		panic(err)
	}
	logger.SetLogger(log)
	out := bufio.NewWriterSize(os.NewFile(uintptr(answers), "answers"), 1<<16)
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	fmt.Fprintln(out, "READY")
	out.Flush()
	for {
		line, err := in.ReadString('\n')
		if strings.TrimSpace(line) != "" {
			result := handle(line)
			encoded, _ := json.Marshal(result)
			out.Write(encoded)
			out.WriteByte('\n')
			if in.Buffered() == 0 {
				out.Flush()
			}
		}
		if err != nil {
			break
		}
	}
	out.Flush()
}

func handle(line string) (result answer) {
	var req request
	decoder := json.NewDecoder(strings.NewReader(line))
	decoder.UseNumber()
	if err := decoder.Decode(&req); err != nil {
		return answer{"error": "bad request: " + err.Error()}
	}
	defer func() {
		if req.ID != nil {
			result["id"] = req.ID
		}
	}()
	log.lines = log.lines[:0]
	if req.Kind == "configurator" {
		return configure(req)
	}
	consumer, err := common.NewURL(req.Consumer)
	if err != nil {
		return answer{"error": "consumer URL: " + err.Error()}
	}
	invokers := make([]base.Invoker, 0, len(req.Providers))
	index := make(map[base.Invoker]int, len(req.Providers))
	for i, text := range req.Providers {
		url, err := common.NewURL(text)
		if err != nil {
			return answer{"error": fmt.Sprintf("provider URL %d: %v", i, err)}
		}
		invoker := base.NewBaseInvoker(url)
		invokers = append(invokers, invoker)
		index[invoker] = i
	}
	var r router.PriorityRouter
	var refused []string
	key := "oracle"
	switch req.Kind {
	case "condition":
		if req.Scope == "application" {
			r = condition.NewApplicationRouter(consumer)
		} else {
			r = condition.NewServiceRouter()
		}
		refused = []string{"ERROR [Router][Condition]", "WARN [Router][Condition] failed"}
	case "tag":
		r, _ = tag.NewTagPriorityRouter()
		// The tag router's Route reads the document stored under the first provider's
		// application (what its Notify subscribes to).
		key = invokers[0].GetURL().GetParam(constant.ApplicationKey, "") + constant.TagRouterRuleSuffix
		refused = []string{"WARN [Router][Tag] parse"}
	case "affinity":
		r, _ = affinity.NewServiceAffinityRouterFactory().NewPriorityRouter(consumer)
		refused = []string{"ERROR [Router][Affinity]"}
	default:
		return answer{"error": "unknown kind " + req.Kind}
	}
	if req.Rule != "" {
		if message := guarded("reading the document", func() {
			r.(listener).Process(&config_center.ConfigChangeEvent{
				Key: key, Value: req.Rule, ConfigType: remoting.EventTypeAdd,
			})
		}); message != "" {
			return answer{"panic": message}
		}
		if line := log.refusal(refused...); line != "" {
			return answer{"error": line}
		}
	}
	var kept []base.Invoker
	if message := guarded("routing", func() {
		kept = r.Route(invokers, consumer, newInvocation(req.Invocation))
	}); message != "" {
		return answer{"panic": message}
	}
	indexes := make([]int, 0, len(kept))
	for _, invoker := range kept {
		indexes = append(indexes, index[invoker])
	}
	return answer{"kept": indexes}
}

// configure answers a configurator case. The consumer URL is not read: dubbo-go's override
// configurator reads only the URL it configures (and the local IP for a consumer-side URL,
// which a provider URL is not). The provider URLs are configured as registered, without the
// reference URL the directory merges into them first (as the Java oracle does too).
func configure(req request) answer {
	var configurators []config_center.Configurator
	var refused error
	if message := guarded("reading the document", func() {
		urls, err := (&parser.DefaultConfigurationParser{}).ParseToUrls(req.Rule)
		if err != nil {
			refused = err
			return
		}
		configurators = registry.ToConfigurators(urls, extension.GetDefaultConfiguratorFunc())
	}); message != "" {
		return answer{"panic": message}
	}
	if refused != nil {
		return answer{"error": "ParseToUrls: " + refused.Error()}
	}
	urls := make([]map[string]string, 0, len(req.Providers))
	for i, text := range req.Providers {
		url, err := common.NewURL(text)
		if err != nil {
			return answer{"error": fmt.Sprintf("provider URL %d: %v", i, err)}
		}
		if message := guarded("configuring", func() {
			for _, c := range configurators {
				c.Configure(url)
			}
		}); message != "" {
			return answer{"panic": message}
		}
		parameters := map[string]string{}
		url.RangeParams(func(key, value string) bool {
			parameters[key] = value
			return true
		})
		urls = append(urls, parameters)
	}
	return answer{"urls": urls}
}

// guarded runs f and returns "" or what it panicked with.
func guarded(what string, f func()) (message string) {
	defer func() {
		if p := recover(); p != nil {
			message = fmt.Sprintf("%s: %v", what, p)
		}
	}()
	f()
	return ""
}

func newInvocation(c *call) *invocation.RPCInvocation {
	if c == nil {
		c = &call{}
	}
	arguments := make([]any, len(c.Arguments))
	for i, a := range c.Arguments {
		arguments[i] = a
	}
	attachments := make(map[string]any, len(c.Attachments))
	for k, v := range c.Attachments {
		attachments[k] = fmt.Sprint(v)
	}
	return invocation.NewRPCInvocation(c.Method, arguments, attachments)
}
