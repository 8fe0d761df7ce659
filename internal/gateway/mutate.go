package gateway

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"code.gitea.io/sdk/gitea"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// writeBody is what the gateway reads from a mutation's JSON body.
type writeBody struct {
	Event        string `json:"event"`
	CommitID     string `json:"commit_id"`
	HeadCommitID string `json:"head_commit_id"`
	Head         string `json:"head"`
	Title        string `json:"title"`
	Body         string `json:"body"`
}

// mutate decides one mutation at the moment of the write and forwards it when allowed.
func (g *Gateway) mutate(w http.ResponseWriter, r *http.Request, rt claim.Route, wr *fleetv1alpha1.WorkerRegistration) {
	ctx := r.Context()
	write := claim.Write{Route: rt}
	forward, length, status, err := g.readWrite(w, r, &write)
	if err != nil {
		logf.FromContext(ctx).Info("Refusing a mutation whose body cannot be read", "error", err.Error())
		if status == http.StatusRequestEntityTooLarge {
			countRequest(rt.Operation, verdictRefused)
			writeRefusal(w, status, rt.Operation, claim.ReasonMalformedRequest, "the request body is too large")
			return
		}
		g.refuse(w, r, rt.Operation, wr, nil, claim.ReasonMalformedRequest)
		return
	}

	// Authoritative state, read now: the caller's claims from the API server, and what
	// the decision needs from Gitea.
	list := &fleetv1alpha1.TaskClaimList{}
	if err := g.Reader.List(ctx, list, client.InNamespace(wr.Namespace)); err != nil {
		g.failWrite(w, r, rt.Operation, err)
		return
	}
	in := claim.WriteInput{Worker: wr.Name, Identity: wr.Spec.Identity, Repository: g.Repository, Write: write, Now: g.Clock.Now()}
	own := map[string]*fleetv1alpha1.TaskClaim{}
	for i := range list.Items {
		tc := &list.Items[i]
		if tc.Spec.Worker != wr.Name {
			continue // another worker's claim is never considered
		}
		own[tc.Name] = tc
		in.Claims = append(in.Claims, claim.HeldClaim{Namespace: tc.Namespace, Name: tc.Name, Worker: tc.Spec.Worker,
			Phase: tc.Status.Phase, Capability: apiconv.Capability(tc)})
	}
	if err := g.readFacts(ctx, &in); err != nil {
		g.failWrite(w, r, rt.Operation, err)
		return
	}
	v := claim.AuthorizeWrite(in)
	tc := own[v.Claim]
	if !v.Allowed {
		g.refuse(w, r, v.Operation, wr, tc, v.Reason)
		return
	}

	out := r.Clone(ctx)
	out.Body, out.ContentLength = io.NopCloser(forward), length
	if length < 0 {
		out.Header.Del("Content-Length")
	}
	out.Header.Del("Content-Encoding") // the body forwarded is the decoded one
	sw := &statusWriter{ResponseWriter: w}
	g.proxy.ServeHTTP(sw, out)
	countRequest(v.Operation, verdictAllowed)
	g.Recorder.Eventf(tc, nil, "Normal", ReasonForwarded, v.Operation, "Gateway forwarded %s %s as %s; Gitea answered %d",
		r.Method, r.URL.Path, wr.Spec.Identity, sw.status)
}

func (g *Gateway) failWrite(w http.ResponseWriter, r *http.Request, op string, err error) {
	logf.FromContext(r.Context()).Error(err, "Cannot read the state a mutation is decided on; refusing")
	g.fail(w, op, err)
}

// readWrite reads the facts of the body the route's rule needs and returns the body to
// forward and its length (-1 when unknown).
func (g *Gateway) readWrite(w http.ResponseWriter, r *http.Request, write *claim.Write) (io.Reader, int64, int, error) {
	if write.Route.Body == claim.BodyReceivePack {
		var src io.Reader = http.MaxBytesReader(w, r.Body, g.MaxPush)
		length := r.ContentLength
		if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
			zr, err := gzip.NewReader(src)
			if err != nil {
				return nil, 0, http.StatusBadRequest, err
			}
			src, length = zr, -1
		}
		br := bufio.NewReader(src)
		refs, consumed, err := readRefUpdates(br)
		if err != nil {
			return nil, 0, statusOf(err), err
		}
		write.Refs = refs
		return io.MultiReader(bytes.NewReader(consumed), br), length, 0, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.MaxBody))
	if err != nil {
		return nil, 0, statusOf(err), err
	}
	if write.Route.Body != claim.BodyAny {
		// Gitea also binds form bodies; only JSON is read here, so only JSON is forwarded.
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			return nil, 0, http.StatusBadRequest, errors.New("the body must be application/json")
		}
		var body writeBody
		if err := json.Unmarshal(b, &body); err != nil {
			return nil, 0, http.StatusBadRequest, err
		}
		write.Event = body.Event
		write.CommitID = body.CommitID
		if write.Route.Body == claim.BodyMerge {
			write.CommitID = body.HeadCommitID
		}
		write.PullHead, write.PullText = body.Head, body.Title+"\n"+body.Body
	}
	return bytes.NewReader(b), int64(len(b)), 0, nil
}

func statusOf(err error) int {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// readFacts reads from Gitea what the decision needs: for a numbered route on the
// caller's bound pull request, its head now (and, for review, approve and merge, its full
// state for the independence re-check); for pushes and new pull requests, the default
// branch.
func (g *Gateway) readFacts(ctx context.Context, in *claim.WriteInput) error {
	rt := in.Write.Route
	switch rt.Body {
	case claim.BodyReceivePack, claim.BodyOpenPull:
		owner, name, _ := strings.Cut(g.Repository, "/")
		repo, resp, err := g.Gitea.SDK(ctx).GetRepo(owner, name)
		if err != nil {
			return fmt.Errorf("reading %s (HTTP %s): %w", g.Repository, status(resp), err)
		}
		in.DefaultBranch = repo.DefaultBranch
		return nil
	}
	for _, h := range in.Claims {
		c := h.Capability
		if h.Worker != in.Worker || h.Phase != fleetv1alpha1.ClaimPhaseActive || c == nil ||
			c.Target.Kind != claim.KindPullRequest || c.Target.Number != rt.Number {
			continue
		}
		t := claim.Target{Repository: c.Repository, Kind: claim.KindPullRequest, Number: c.Target.Number}
		if rt.Body == claim.BodyReview || rt.Body == claim.BodyMerge {
			st, err := g.Gitea.ReadTarget(ctx, t)
			if err != nil {
				return fmt.Errorf("reading %s: %w", t, err)
			}
			in.Target, in.LiveHead = &st, st.Target.HeadSHA
			return nil
		}
		owner, name, _ := strings.Cut(c.Repository, "/")
		pr, resp, err := g.Gitea.SDK(ctx).GetPullRequest(owner, name, c.Target.Number)
		if err != nil {
			return fmt.Errorf("reading %s (HTTP %s): %w", t, status(resp), err)
		}
		if pr.Head != nil {
			in.LiveHead = pr.Head.Sha
		}
		return nil
	}
	return nil
}

func status(resp *gitea.Response) string {
	if resp == nil || resp.Response == nil {
		return "none"
	}
	return resp.Status
}
