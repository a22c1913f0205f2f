package proxyconfig

import (
	"fmt"
	"strings"
)

// ifNameMax is the longest interface name the kernel takes: IFNAMSIZ (16)
// less the terminating NUL.
const ifNameMax = 15

// InterfaceName checks a pod interface setting (--pod-bridge-interface,
// or with prefix --pod-interface-name-prefix) before it is written into
// an iptables-restore payload as "-i NAME" (or "-i NAME+"): a newline or a
// quote there would add or break rules. It takes what the kernel takes as
// a name (dev_valid_name: 1 to 15 bytes, not "." or "..", no '/', ':' or
// white space), less what iptables-restore would read otherwise: control
// characters, quotes and backslashes (its tokenizer's), a leading '!' or
// '-' (negation, an option), and a bridge name ending in '+', which
// iptables would match as a prefix. A prefix gets a '+' appended, so it may
// be 14 bytes at most.
func InterfaceName(name string, prefix bool) error {
	limit, of := ifNameMax, "an interface name has"
	if prefix {
		limit, of = ifNameMax-1, "a prefix, with the '+' iptables matches it by, has"
	}
	switch {
	case name == "":
		return fmt.Errorf("must not be empty")
	case len(name) > limit:
		return fmt.Errorf("%d bytes: %s at most %d", len(name), of, limit)
	case name == "." || name == "..":
		return fmt.Errorf("not an interface name")
	case strings.HasPrefix(name, "!") || strings.HasPrefix(name, "-"):
		return fmt.Errorf("must not start with %q", name[:1])
	case !prefix && strings.HasSuffix(name, "+"):
		return fmt.Errorf("ends in '+', which iptables matches as a prefix")
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c < 0x20 || c == 0x7f || c == 0xa0 || c == ' ':
			// The kernel's isspace also takes 0xa0 (Latin-1's no-break space).
			return fmt.Errorf("white space or a control character (byte %d)", i)
		case c == '/' || c == ':' || c == '"' || c == '\'' || c == '\\':
			return fmt.Errorf("%q is not allowed", c)
		}
	}
	return nil
}
