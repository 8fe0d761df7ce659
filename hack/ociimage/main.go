// Command ociimage writes a single-layer OCI image archive from files on this machine,
// with no container engine and no registry. hack/images.sh builds the manager and worker
// images with it, and hack/cluster.sh the sandbox (pause) image; `ctr images import`
// loads the archive into a node's containerd.
//
//	ociimage -o OUT.tar -name REF [-entrypoint PATH] [-cmd ARG]... [-user UID:GID]
//	         [-env KEY=VALUE]... [-nonroot] SRC=DEST...
//
// Every file is owned by root, dated 1970 and keeps its own mode bits, so the same inputs
// give the same image digest. -nonroot adds an /etc/passwd and /etc/group naming root
// and nonroot (65532), as distroless images carry.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("ociimage", flag.ContinueOnError)
	out := fs.String("o", "", "the archive to write")
	ref := fs.String("name", "", "the image reference, e.g. docker.io/library/fleet-controller:dev")
	entrypoint := fs.String("entrypoint", "", "the entrypoint")
	user := fs.String("user", "", "the user the image runs as (UID:GID)")
	nonroot := fs.Bool("nonroot", false, "add /etc/passwd and /etc/group with root and nonroot (65532)")
	var cmd, env stringList
	fs.Var(&cmd, "cmd", "an argument of the default command (repeat)")
	fs.Var(&env, "env", "KEY=VALUE in the image's environment (repeat)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *ref == "" || fs.NArg() == 0 {
		return errors.New("usage: ociimage -o OUT.tar -name REF [flags] SRC=DEST (one or more)")
	}
	tag, err := name.NewTag(*ref)
	if err != nil {
		return fmt.Errorf("-name: %w", err)
	}
	files := map[string][]byte{}
	modes := map[string]int64{}
	for _, spec := range fs.Args() {
		src, dest, ok := strings.Cut(spec, "=")
		if !ok || !path.IsAbs(dest) {
			return fmt.Errorf("%q: want SRC=/absolute/destination", spec)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		st, err := os.Stat(src)
		if err != nil {
			return err
		}
		files[path.Clean(dest)], modes[path.Clean(dest)] = b, int64(st.Mode().Perm())
	}
	if *nonroot {
		files["/etc/passwd"] = []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")
		files["/etc/group"] = []byte("root:x:0:\nnonroot:x:65532:\n")
		modes["/etc/passwd"], modes["/etc/group"] = 0o644, 0o644
	}
	layerTar, err := tarOf(files, modes)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Cmd: cmd, User: *user, Env: env, WorkingDir: "/"}
	if *entrypoint != "" {
		cf.Config.Entrypoint = []string{*entrypoint}
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	return writeArchive(*out, img, *ref, tag.TagStr())
}

// tarOf is the layer: every parent folder, then every file, in name order.
func tarOf(files map[string][]byte, modes map[string]int64) ([]byte, error) {
	dirs := map[string]bool{}
	for f := range files {
		for d := path.Dir(f); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	names := make([]string, 0, len(dirs)+len(files))
	for d := range dirs {
		names = append(names, d+"/")
	}
	for f := range files {
		names = append(names, f)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		h := &tar.Header{Name: strings.TrimPrefix(n, "/"), Format: tar.FormatPAX}
		if strings.HasSuffix(n, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		} else {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, modes[n], int64(len(files[n]))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(files[n]); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeArchive writes img as an OCI image layout and packs the layout into out. The index
// names the image ref the way containerd's import reads it.
func writeArchive(out string, img v1.Image, ref, tag string) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".ociimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		// As given: the registry's short name stays docker.io, as the kubelet asks for it.
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": tag,
	})); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := packDir(dir, tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}

// packDir writes the files below dir into a tar archive at out, in name order.
func packDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), 0, 0, "", ""
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
