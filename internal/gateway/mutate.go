package gateway

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"code.gitea.io/sdk/gitea"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// earlyReads is what a REST mutation reads before its registration is known: its
// caller's claims (in flight), its body, and for a comment the speculative reservation of
// its budget (in flight). Nothing in it is decided on until the registration is.
type earlyReads struct {
	claims  *claimsRead
	write   claim.Write
	forward io.Reader
	length  int64
	status  int
	err     error
	spec    *speculativeReservation
}

// startReads reads a REST mutation's body and starts the reads that do not need its
// registration: the caller's claims and, for a comment, the reservation of its budget on
// the claim the cache names (speculate). The decision keeps that reservation only when
// it picks that same claim.
func (g *Gateway) startReads(ctx context.Context, w http.ResponseWriter, r *http.Request, rt claim.Route, caller Caller) *earlyReads {
	e := &earlyReads{claims: g.readClaims(ctx, caller.Namespace, caller.Name), write: claim.Write{Route: rt}}
	e.forward, e.length, _, e.status, e.err = g.readWrite(w, r, &e.write, nil)
	if e.err == nil && rt.Body == claim.BodyComment {
		e.spec = g.speculate(ctx, caller, rt, e.write)
	}
	return e
}

// mutate decides one mutation at the moment of the write and forwards it when allowed.
// A REST mutation arrives with its early reads (startReads); a push reads its body here,
// once its registration is known.
func (g *Gateway) mutate(w http.ResponseWriter, r *http.Request, rt claim.Route, wr *fleetv1alpha1.WorkerRegistration, early *earlyReads) {
	ctx := r.Context()
	var (
		write   claim.Write
		forward io.Reader
		length  int64
		push    pushReport
		status  int
		err     error
		spec    *speculativeReservation
		claims  *claimsRead
	)
	if early != nil {
		write, forward, length, status, err, spec, claims = early.write, early.forward, early.length, early.status, early.err, early.spec, early.claims
	} else {
		write = claim.Write{Route: rt}
		forward, length, push, status, err = g.readWrite(w, r, &write, wr)
	}
	defer push.pack.close()
	defer spec.discard()
	if err != nil {
		logf.FromContext(ctx).Info("Refusing a mutation whose body cannot be read", "error", err.Error())
		if status == http.StatusRequestEntityTooLarge {
			countRequest(rt.Operation, verdictRefused)
			writeRefusal(w, status, rt.Operation, claim.ReasonMalformedRequest, "the request body is too large")
			return
		}
		g.refuse(w, r, rt.Operation, wr, claim.ReasonMalformedRequest)
		return
	}

	// Authoritative state, read now: the caller's claims from the API server (for a REST
	// write, read while the registration was; a push's after its whole pack arrived), and
	// what the decision needs from Gitea.
	if claims == nil {
		claims = g.readClaims(ctx, wr.Namespace, wr.Name)
	}
	list, err := claims.wait()
	if err != nil {
		g.failWrite(w, r, rt.Operation, err)
		return
	}
	up := r.Context().Value(actingKey{}).(acting).up
	in := claim.WriteInput{Worker: wr.Name, Identity: wr.Spec.Identity, Repository: up.repository, Where: up.key,
		Write: write, Now: g.Clock.Now()}
	own := map[string]*fleetv1alpha1.TaskClaim{}
	for i := range list.Items {
		tc := &list.Items[i]
		if tc.Spec.Worker != wr.Name {
			continue // another worker's claim is never considered
		}
		own[tc.Name] = tc
		in.Claims = append(in.Claims, claim.HeldClaim{Namespace: tc.Namespace, Name: tc.Name, Worker: tc.Spec.Worker,
			Phase: tc.Status.Phase, Capability: apiconv.Capability(tc), Where: apiconv.ClaimRepositoryKey(tc)})
	}
	if err := g.readFacts(ctx, up, &in); err != nil {
		g.failWrite(w, r, rt.Operation, err)
		return
	}
	if push.pack != nil {
		err := inspectPack(push.pack, push.caps, g.MaxPush, &in.Write, func() (string, string, error) {
			if in.DefaultBranch == "" {
				return "", "", errors.New("the default branch is unknown")
			}
			return up.gitea.RootEntry(ctx, up.repository, in.DefaultBranch, claim.ProtectedDir)
		})
		if errors.Is(err, errUnreadablePack) {
			logf.FromContext(ctx).Info("Refusing a push whose pack cannot be read on its own", "error", err.Error())
			g.refusePush(w, r, push, claim.WriteVerdict{Operation: rt.Operation, Reason: claim.ReasonUnreadablePack}, wr, nil)
			return
		} else if err != nil {
			g.failWrite(w, r, rt.Operation, err)
			return
		}
	}
	v := claim.AuthorizeWrite(in)
	tc := own[v.Claim]
	var reserved *reservation
	if v.Allowed && rt.Body == claim.BodyComment {
		if reserved, v, err = g.reserveComment(ctx, in, tc, v, spec); err != nil {
			g.failWrite(w, r, rt.Operation, err)
			return
		}
	}
	if !v.Allowed {
		if push.reportable() {
			g.refusePush(w, r, push, v, wr, tc)
			return
		}
		g.refuseWrite(w, r, v, wr, tc)
		return
	}

	if v.FillHead != "" {
		// A review or merge that named no commit is made at the head the decision was on.
		b, err := io.ReadAll(forward)
		if err == nil {
			b, err = fillHead(b, rt.Body, v.FillHead)
		}
		if err != nil {
			g.failWrite(w, r, rt.Operation, err)
			return
		}
		forward, length = bytes.NewReader(b), int64(len(b))
	}
	out := r.Clone(g.completing(ctx, tc, v.Operation))
	digest := newDigestReader(forward)
	out.Body, out.ContentLength = io.NopCloser(digest), length
	if length < 0 {
		out.Header.Del("Content-Length")
	}
	out.Header.Del("Content-Encoding") // the body forwarded is the decoded one
	asRead(out, rt)
	sw := &statusWriter{ResponseWriter: w}
	g.proxy.ServeHTTP(sw, out)
	countRequest(v.Operation, verdictAllowed)
	if reserved != nil && (sw.status < 200 || sw.status > 299) {
		reserved.release()
	}
	g.audit.forwarded(ctx, tc, forwardedWrite{operation: v.Operation, method: r.Method, path: r.URL.Path,
		identity: wr.Spec.Identity, status: sw.status, digest: digest.Sum()})
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
func (g *Gateway) readWrite(w http.ResponseWriter, r *http.Request, write *claim.Write, wr *fleetv1alpha1.WorkerRegistration) (io.Reader, int64, pushReport, int, error) {
	if write.Route.Body == claim.BodyReceivePack {
		g.pushDeadline(r.Context(), w, wr)
		var src io.Reader = http.MaxBytesReader(w, r.Body, g.MaxPush)
		if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
			zr, err := gzip.NewReader(src)
			if err != nil {
				return nil, 0, pushReport{}, http.StatusBadRequest, err
			}
			// The limit holds for what Gitea receives too: the decompressed pack.
			src = http.MaxBytesReader(nil, zr, g.MaxPush)
		}
		br := bufio.NewReader(src)
		refs, caps, consumed, err := readRefUpdates(br)
		if err != nil {
			return nil, 0, pushReport{}, statusOf(err), err
		}
		write.Refs = refs
		pack, err := spoolPack(br)
		if err != nil {
			return nil, 0, pushReport{}, statusOf(err), err
		}
		rest, err := pack.reader()
		if err != nil {
			pack.close()
			return nil, 0, pushReport{}, http.StatusInternalServerError, err
		}
		return io.MultiReader(bytes.NewReader(consumed), rest), int64(len(consumed)) + pack.size,
			pushReport{refs: refs, caps: caps, pack: pack}, 0, nil
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
		if write.Route.Path != "" {
			write.ChangedPaths = append(write.ChangedPaths, write.Route.Path) // the contents API's file
		}
	}
	return bytes.NewReader(b), int64(len(b)), pushReport{}, 0, nil
}

// refusePush refuses a push with a receive-pack result that rejects its refs: git then
// shows the worker the reason. The pack has been read already (readWrite spools it), so
// the client has finished sending when it reads the answer. Gitea sees nothing.
func (g *Gateway) refusePush(w http.ResponseWriter, r *http.Request, push pushReport, v claim.WriteVerdict,
	wr *fleetv1alpha1.WorkerRegistration, tc *fleetv1alpha1.TaskClaim) {
	countRequest(v.Operation, verdictRefused)
	g.recordRefusal(r, v.Operation, wr, tc, v.Reason)
	message := cmp.Or(v.Message, claim.RefusalMessage(v.Reason))
	if !push.reportable() {
		writeRefusal(w, http.StatusForbidden, v.Operation, v.Reason, message)
		return
	}
	w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(push.body(v.Reason, message))
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
// state for the independence re-check); for pushes, contents API commits and new pull
// requests, the default branch. It reads from up, the server the request goes to.
func (g *Gateway) readFacts(ctx context.Context, up *upstream, in *claim.WriteInput) error {
	rt := in.Write.Route
	switch rt.Body {
	case claim.BodyReceivePack, claim.BodyOpenPull, claim.BodyContents:
		owner, name, _ := strings.Cut(up.repository, "/")
		repo, resp, err := up.gitea.SDK(ctx).GetRepo(owner, name)
		if err != nil {
			return fmt.Errorf("reading %s (HTTP %s): %w", up.repository, status(resp), err)
		}
		in.DefaultBranch = repo.DefaultBranch
		return nil
	}
	for _, h := range in.Claims {
		c := h.Capability
		if h.Worker != in.Worker || h.Phase != fleetv1alpha1.ClaimPhaseActive || c == nil || h.Where != in.Where ||
			c.Target.Kind != claim.KindPullRequest || c.Target.Number != rt.Number {
			continue
		}
		t := claim.Target{Repository: c.Repository, Kind: claim.KindPullRequest, Number: c.Target.Number}
		if rt.Body == claim.BodyReview || rt.Body == claim.BodyMerge {
			return readPullFacts(ctx, up.gitea, in, t)
		}
		owner, name, _ := strings.Cut(c.Repository, "/")
		pr, resp, err := up.gitea.SDK(ctx).GetPullRequest(owner, name, c.Target.Number)
		if err != nil {
			return fmt.Errorf("reading %s (HTTP %s): %w", t, status(resp), err)
		}
		if pr.Head != nil {
			in.LiveHead = pr.Head.Sha
		}
		in.TargetText = pr.Title + "\n" + pr.Body
		return nil
	}
	return nil
}

// readPullFacts reads the bound pull request for a review or merge: its state (the
// independence re-check, its head and the issues its title and body name) and, for a
// merge, what the merge carries onto the default branch, where Gitea acts on it: its
// commits' messages and the paths it changes. The reads run concurrently.
func readPullFacts(ctx context.Context, gc *giteaclaim.Client, in *claim.WriteInput, t claim.Target) error {
	var (
		wg                     sync.WaitGroup
		st                     claim.TargetState
		stErr, msgErr, fileErr error
	)
	wg.Go(func() { st, stErr = gc.ReadTarget(ctx, t) })
	if in.Write.Route.Body == claim.BodyMerge {
		wg.Go(func() { in.PullCommits, msgErr = gc.PullCommitMessages(ctx, t.Repository, t.Number) })
		wg.Go(func() { in.PullFiles, fileErr = gc.PullFiles(ctx, t.Repository, t.Number) })
	}
	wg.Wait()
	if err := errors.Join(stErr, msgErr, fileErr); err != nil {
		return fmt.Errorf("reading %s: %w", t, err)
	}
	in.Target, in.LiveHead = &st, st.Target.HeadSHA
	in.TargetText = st.Title + "\n" + st.RecordBody
	return nil
}

func status(resp *gitea.Response) string {
	if resp == nil || resp.Response == nil {
		return "none"
	}
	return resp.Status
}

// reserveComment reserves the comment against the capability's budget (budget.go) and
// refuses it when the budget is used up. A speculative reservation made on the same claim
// is taken over; any other is given back.
func (g *Gateway) reserveComment(ctx context.Context, in claim.WriteInput, tc *fleetv1alpha1.TaskClaim, v claim.WriteVerdict,
	spec *speculativeReservation) (*reservation, claim.WriteVerdict, error) {
	if tc == nil {
		return nil, claim.WriteVerdict{}, errors.New("an allowed comment without its claim")
	}
	refused := claim.WriteVerdict{Operation: v.Operation, Reason: claim.ReasonCommentBudget,
		Message: claim.RefusalMessage(claim.ReasonCommentBudget), Claim: v.Claim}
	if spec.take(tc) {
		switch {
		case spec.err != nil:
			return nil, claim.WriteVerdict{}, spec.err
		case !spec.ok:
			return nil, refused, nil
		}
		return spec.res, v, nil
	}
	res, ok, err := g.budgets.reserve(ctx, tc, in.Identity, g.CommentBudget, commentSize(in.Write))
	if err != nil {
		return nil, claim.WriteVerdict{}, err
	}
	if !ok {
		return nil, refused, nil
	}
	return res, v, nil
}

func commentSize(w claim.Write) int {
	size := 0
	for _, text := range w.Text {
		size += len(text)
	}
	return size
}

// seedBudget counts, in Gitea (the server the claim was decided on), the comments
// identity wrote on the claim's target since the TaskClaim was created: what a
// capability's budget starts from.
func (g *Gateway) seedBudget(ctx context.Context, tc *fleetv1alpha1.TaskClaim, identity string) (int, int, error) {
	c := apiconv.Capability(tc)
	if c == nil {
		return 0, 0, errors.New("a comment without its capability")
	}
	gc, err := g.serverOf(ctx, tc)
	if err != nil {
		return 0, 0, err
	}
	t := claim.Target{Repository: c.Repository, Kind: c.Target.Kind, Number: c.Target.Number}
	return gc.CommentsBy(ctx, t, identity, tc.CreationTimestamp.Time)
}
