package console

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tributary-cdp/tributary/schemas"
)

// The settings page: the whole config as YAML, to keep in Git (docs/console.md).

func (u *ui) settings(w http.ResponseWriter, r *http.Request) {
	u.renderSettings(w, r, http.StatusOK, &importForm{}, "")
}

// importForm is the config import of the settings page: the file pasted or uploaded, and the
// dry run's changes or the file's errors.
type importForm struct {
	YAML      string
	TakeOver  bool
	Previewed bool // a dry run answered: Changes is the diff
	Changes   []change
	Errors    []string // the file's problems, each with its line
	Conflict  bool     // an object a config file manages would change: take over?
	Digest    string   // of the file the dry run read: apply applies that file only
}

// digest identifies a config file's text (the import's preview and apply must be of one file).
func digest(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:16])
}

// renderSettings renders the settings page with the import form's state.
func (u *ui) renderSettings(w http.ResponseWriter, r *http.Request, status int, imp *importForm, general string) {
	snap := u.s.deps.Store.Snapshot()
	cfg, comments := u.s.exportedConfig(snap, u.s.now())
	out, err := configYAML(cfg, "", comments)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	data := map[string]any{
		"YAML": string(out), "Sources": len(snap.Sources()), "Destinations": len(snap.Destinations()),
		"Audiences": len(snap.Audiences()), "Traits": len(snap.ComputedTraits()), "Addr": u.s.cfg.Addr, "Import": imp,
	}
	if u.s.keys != nil {
		data["KeyID"] = u.s.keys.KeyIDs()[0]
		unsealed := 0
		for _, o := range objectsOf(snap) {
			if snap.NeedsSealing(o.Kind, o.ID) {
				unsealed++
			}
		}
		data["Unsealed"] = unsealed
	}
	u.render(w, r, status, "settings", page{Title: "Settings", Nav: "settings", Error: general, Data: data})
}

// importConfigPage imports a config file pasted or uploaded (YAML or JSON): first a dry run
// that shows what would change (as PUT /v1/config?dryRun=true: the same service method), then,
// with apply, the change itself, and a redirect (a reload applies nothing again).
func (u *ui) importConfigPage(w http.ResponseWriter, r *http.Request) {
	imp := &importForm{YAML: r.PostFormValue("yaml"), TakeOver: r.PostFormValue("takeOver") == "true"}
	if r.MultipartForm != nil {
		if fhs := r.MultipartForm.File["file"]; len(fhs) > 0 && fhs[0].Size > 0 {
			f, err := fhs[0].Open()
			if err == nil {
				b, rerr := io.ReadAll(io.LimitReader(f, maxImportBody))
				_ = f.Close()
				err = rerr
				imp.YAML = string(b)
			}
			if err != nil {
				u.renderSettings(w, r, http.StatusBadRequest, imp, "The file could not be read: "+err.Error())
				return
			}
		}
	}
	// As a textarea sends it back: LF line ends, no leading blank line (a browser sends CRLF
	// and drops the textarea's first newline), so that the preview's digest matches the apply's.
	imp.YAML = strings.TrimLeft(strings.ReplaceAll(imp.YAML, "\r\n", "\n"), "\n")
	if strings.TrimSpace(imp.YAML) == "" {
		imp.Errors = []string{"Paste a config file (YAML or JSON, as the download above) or choose one to upload."}
		u.renderSettings(w, r, http.StatusBadRequest, imp, "")
		return
	}
	format := schemas.ConfigFormatYAML
	if t := strings.TrimSpace(imp.YAML); strings.HasPrefix(t, "{") {
		format = schemas.ConfigFormatJSON
	}
	apply := r.PostFormValue("apply") == "true"
	changedSincePreview := apply && r.PostFormValue("digest") != digest(imp.YAML)
	if changedSincePreview {
		apply = false // a file that is not the one previewed: preview it first
	}
	changes, err := u.s.applyConfig(r.Context(), []byte(imp.YAML), format, !apply, imp.TakeOver)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			u.fail(w, r, err)
			return
		}
		imp.Conflict = ae.Code == codeManagedByFile
		if len(ae.Errors) == 0 {
			imp.Errors = []string{ae.Message}
		}
		for _, e := range ae.Errors {
			imp.Errors = append(imp.Errors, e.Message)
		}
		u.renderSettings(w, r, ae.Status, imp, "")
		return
	}
	if !apply {
		imp.Previewed, imp.Changes, imp.Digest = true, changes, digest(imp.YAML)
		general := ""
		if changedSincePreview {
			general = "The file changed since its preview: nothing was applied. Here is what it changes now."
		}
		u.renderSettings(w, r, http.StatusOK, imp, general)
		return
	}
	done := "The config file is applied: " + plural(len(changes), "change") + "."
	if len(changes) == 0 {
		done = "The config file is applied: nothing changed."
	}
	u.redirect(w, r, "/settings", done)
}

// reencrypt is the settings page's button: POST /v1/config/reencrypt.
func (u *ui) reencrypt(w http.ResponseWriter, r *http.Request) {
	res, err := u.s.reencryptObjects(r.Context())
	if err != nil {
		u.fail(w, r, err)
		return
	}
	done := fmt.Sprintf("Every secret is encrypted with key %s: %s written again. The records they replace stay in %s until compaction (docs/configuration.md#secrets-at-rest).",
		res.KeyID, plural(len(res.Reencrypted), "destination", "destinations"), u.s.cfg.ConfigTopic)
	if len(res.Reencrypted) == 0 {
		done = "Every secret was encrypted with key " + res.KeyID + " already: nothing was written."
	}
	u.redirect(w, r, "/settings", done)
}

// exportYAML downloads the config file.
func (u *ui) exportYAML(w http.ResponseWriter, r *http.Request) {
	headers(w)
	out, err := u.s.exportYAML()
	if err == nil {
		err = downloadYAML(w, out)
	}
	if err != nil {
		u.fail(w, r, err)
	}
}
