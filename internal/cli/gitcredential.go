package cli

import (
	"bufio"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// gitCredentialLifetime is how long a token handed to git lives: the shortest the API
// server issues. git asks again for every command, so nothing needs to last longer.
const gitCredentialLifetime = 10 * time.Minute

// gitCredentialRequest is what git asks a credential helper: its attributes, one
// key=value per line up to a blank line (gitcredentials(7)).
type gitCredentialRequest map[string]string

func readGitCredentialRequest(r io.Reader) (gitCredentialRequest, error) {
	req := gitCredentialRequest{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, usageErrorf("git credential input: %q is not key=value", line)
		}
		req[k] = v
	}
	return req, sc.Err()
}

// forGateway reports whether git asks for the gateway's credentials: the same scheme and
// host (with its port) as gateway, and, when git sends a path (credential.useHttpPath), one
// under the gateway's own path. A helper that answered every host would hand the worker's
// token to whatever server a remote names.
func (req gitCredentialRequest) forGateway(gateway *url.URL) bool {
	if !strings.EqualFold(req["protocol"], gateway.Scheme) || !strings.EqualFold(req["host"], gateway.Host) {
		return false
	}
	base := strings.Trim(gateway.Path, "/")
	path, sent := req["path"]
	return base == "" || !sent || path == base || strings.HasPrefix(path, base+"/")
}

func newGitCredentialCommand(o *Options) *cobra.Command {
	var worker, gatewayFlag string
	cmd := &cobra.Command{
		Use:   "git-credential get|store|erase",
		Short: "A git credential helper: hands git a fresh gateway token of the worker for the gateway's address",
		Long: `git runs this as a credential helper (gitcredentials(7)). For "get" with the gateway's
scheme and host it requests a token of the worker's ServiceAccount for the gateway's
audience, lasting ` + gitCredentialLifetime.String() + `, and writes it to git on standard output, with its expiry:
the token never appears in a command line, a git config file or the shell history, and
every git command gets one that is still valid. Other hosts get no answer, so git asks
its other helpers. "store" and "erase" do nothing: nothing is kept.`,
		Example: `  # Once, in the worker's clone (or with --global)
  git config credential.helper '!kubectl fleet git-credential'
  git push origin HEAD:fleet/<namespace>/<claim>

  # A single command
  git -c credential.helper='!kubectl fleet git-credential' clone "$FLEET_GATEWAY_URL/acme/widgets.git"`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give the one action git passes: get, store or erase")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := readGitCredentialRequest(o.Streams.In)
			if err != nil {
				return err
			}
			if args[0] != "get" {
				return nil // store, erase: nothing is kept; an action git adds later is ignored
			}
			gw := strings.TrimRight(gatewayFlag, "/")
			if gw == "" {
				gw = strings.TrimRight(o.Getenv(EnvGatewayURL), "/")
			}
			if gw == "" {
				return errNoGateway
			}
			base, err := url.Parse(gw)
			if err != nil || base.Scheme == "" || base.Host == "" {
				return usageErrorf("gateway URL %q: want scheme://host[:port][/path]", gw)
			}
			if !req.forGateway(base) {
				return nil
			}
			name, err := o.workerName(worker)
			if err != nil {
				return err
			}
			ns, err := o.Namespace()
			if err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			tr, err := o.gatewayToken(cmd.Context(), c, ns, name, gitCredentialLifetime)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(o.Streams.Out, "username=%s\npassword=%s\npassword_expiry_utc=%d\n",
				name, tr.Status.Token, tr.Status.ExpirationTimestamp.Unix())
			return err
		},
	}
	workerFlag(cmd, &worker)
	cmd.Flags().StringVar(&gatewayFlag, "gateway-url", "", "Base URL of the Gitea write gateway (default: $"+EnvGatewayURL+").")
	return cmd
}
