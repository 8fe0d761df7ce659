package gateway

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"code.gitea.io/sdk/gitea"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// mutate decides one mutation at the moment of the write and forwards it when allowed.
func (g *Gateway) mutate(w http.ResponseWriter, r *http.Request, rt claim.Route, wr *fleetv1alpha1.WorkerRegistration) {
	ctx := r.Context()
	write := claim.Write{Route: rt}
	forward, length, push, status, err := g.readWrite(w, r, &write)
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
	if v.Allowed && rt.Body == claim.BodyComment {
		if v, err = g.commentBudget(ctx, in, tc, v); err != nil {
			g.failWrite(w, r, rt.Operation, err)
			return
		}
	}
	if !v.Allowed {
		if push.reportable() {
			g.refusePush(w, r, forward, push, v, wr, tc)
			return
		}
		g.refuse(w, r, v.Operation, wr, tc, v.Reason)
		return
	}

	out := r.Clone(ctx)
	out.Body, out.ContentLength = io.NopCloser(forward), length
	if length < 0 {
		out.Header.Del("Content-Length")
	}
	out.Header.Del("Content-Encoding") // the body forwarded is the decoded one
	asRead(out, rt)
	sw := &statusWriter{ResponseWriter: w}
	g.proxy.ServeHTTP(sw, out)
	countRequest(v.Operation, verdictAllowed)
	g.Recorder.Eventf(tc, nil, "Normal", ReasonForwarded, v.Operation, "Gateway forwarded %s %s as %s; Gitea answered %d",
		r.Method, r.URL.Path, wr.Spec.Identity, sw.status)
}

// asRead makes a forwarded REST mutation say to Gitea only what the gateway read: its
// Content-Type is exactly application/json and it has no URL query, which Gitea would
// otherwise bind (form bindings read the query) or act on.
func asRead(out *http.Request, rt claim.Route) {
	if rt.Body == claim.BodyReceivePack {
		return
	}
	out.Header.Set("Content-Type", "application/json")
	out.URL.RawQuery, out.URL.ForceQuery = "", false
	out.Form, out.PostForm, out.MultipartForm = nil, nil, nil
}

func (g *Gateway) failWrite(w http.ResponseWriter, r *http.Request, op string, err error) {
	logf.FromContext(r.Context()).Error(err, "Cannot read the state a mutation is decided on; refusing")
	g.fail(w, op, err)
}

// readWrite reads the facts of the body the route's rule needs and returns the body to
// forward and its length (-1 when unknown); for a push, also what a git-level refusal
// needs.
func (g *Gateway) readWrite(w http.ResponseWriter, r *http.Request, write *claim.Write) (io.Reader, int64, pushReport, int, error) {
	if write.Route.Body == claim.BodyReceivePack {
		var src io.Reader = http.MaxBytesReader(w, r.Body, g.MaxPush)
		length := r.ContentLength
		if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
			zr, err := gzip.NewReader(src)
			if err != nil {
				return nil, 0, pushReport{}, http.StatusBadRequest, err
			}
			// The limit holds for what Gitea receives too: the decompressed pack.
			src, length = http.MaxBytesReader(nil, zr, g.MaxPush), -1
		}
		br := bufio.NewReader(src)
		refs, caps, consumed, err := readRefUpdates(br)
		if err != nil {
			return nil, 0, pushReport{}, statusOf(err), err
		}
		write.Refs = refs
		return io.MultiReader(bytes.NewReader(consumed), br), length, pushReport{refs: refs, caps: caps}, 0, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.MaxBody))
	if err != nil {
		return nil, 0, pushReport{}, statusOf(err), err
	}
	if write.Route.Body != claim.BodyAny {
		// Gitea also binds form bodies and the query; only JSON is read here, so only JSON
		// is forwarded (body.go).
		if !JSONContentType(r.Header.Get("Content-Type")) {
			return nil, 0, pushReport{}, http.StatusBadRequest, errors.New("the body must be application/json")
		}
		if err := decodeBody(b, write); err != nil {
			return nil, 0, pushReport{}, http.StatusBadRequest, err
		}
		write.PullText = strings.Join(write.Text, "\n")
	}
	return bytes.NewReader(b), int64(len(b)), pushReport{}, 0, nil
}

// refusePush refuses a push with a receive-pack result that rejects its refs: git then
// shows the worker the reason. The pack is read (within MaxPush) and dropped first, so the
// client finishes sending before it reads the answer. Gitea sees nothing.
func (g *Gateway) refusePush(w http.ResponseWriter, r *http.Request, pack io.Reader, push pushReport, v claim.WriteVerdict,
	wr *fleetv1alpha1.WorkerRegistration, tc *fleetv1alpha1.TaskClaim) {
	countRequest(v.Operation, verdictRefused)
	g.recordRefusal(r, v.Operation, wr, tc, v.Reason)
	if _, err := io.Copy(io.Discard, pack); err != nil {
		writeRefusal(w, statusOf(err), v.Operation, v.Reason, claim.RefusalMessage(v.Reason))
		return
	}
	w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(push.body(v.Reason, claim.RefusalMessage(v.Reason)))
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

// commentBudget counts, in Gitea, the comments the caller's identity wrote on the claim's
// target since the TaskClaim was created, and refuses the comment when it would exceed
// the gateway's CommentBudget. Counting in Gitea holds across gateway replicas.
func (g *Gateway) commentBudget(ctx context.Context, in claim.WriteInput, tc *fleetv1alpha1.TaskClaim, v claim.WriteVerdict) (claim.WriteVerdict, error) {
	c := apiconv.Capability(tc)
	if tc == nil || c == nil {
		return claim.WriteVerdict{}, errors.New("an allowed comment without its capability")
	}
	t := claim.Target{Repository: c.Repository, Kind: c.Target.Kind, Number: c.Target.Number}
	used, usedBytes, err := g.Gitea.CommentsBy(ctx, t, in.Identity, tc.CreationTimestamp.Time)
	if err != nil {
		return claim.WriteVerdict{}, err
	}
	next := 0
	for _, text := range in.Write.Text {
		next += len(text)
	}
	if !g.CommentBudget.Allows(used, usedBytes, next) {
		return claim.WriteVerdict{Operation: v.Operation, Reason: claim.ReasonCommentBudget,
			Message: claim.RefusalMessage(claim.ReasonCommentBudget), Claim: v.Claim}, nil
	}
	return v, nil
}
