package devstack_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docRef is a document the repository's text cites: a path ending in .md and an optional
// heading anchor. It is a markdown link's target ("delivery.md#retry-tiers") or a name in a
// comment, a doc tag or a string ("docs/delivery.md#retry-tiers").
var docRef = regexp.MustCompile("[^\\s()\\[\\]<>\"'`,;*|]*[.]md(#[\\w%-]+)?")

// sameFileLink is a markdown link to a heading of the same document: "](#retry-tiers)".
var sameFileLink = regexp.MustCompile(`\]\(#([\w%-]+)\)`)

// TestDocLinks: every document the repository's docs, comments, doc tags, messages and
// manifests cite (a path ending in .md) exists, and every heading anchor cited
// ("docs/delivery.md#retry-tiers", "](#retry-tiers)") is one of that document's, by GitHub's
// rules (headingAnchors). A path resolves from the citing file's folder (a markdown link),
// from the repository's root (a comment's "docs/delivery.md") or from docs/ (a settings doc
// tag, rendered into docs/configuration.md).
func TestDocLinks(t *testing.T) {
	const root = ".."
	anchors := map[string]map[string]bool{} // document (slash path from root) → its anchors
	anchorsOf := func(doc string) map[string]bool {
		if a, ok := anchors[doc]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
		if err != nil {
			t.Fatal(err)
		}
		anchors[doc] = headingAnchors(string(b))
		return anchors[doc]
	}
	exists := func(doc string) bool {
		st, err := os.Stat(filepath.Join(root, filepath.FromSlash(doc)))
		return err == nil && !st.IsDir()
	}
	var bad []string
	checked := 0
	walkText(t, root, func(rel, ext string, lines []string) {
		dir := filepath.ToSlash(filepath.Dir(rel))
		for i, line := range lines {
			at := fmt.Sprintf("%s:%d", rel, i+1)
			for _, loc := range docRef.FindAllStringIndex(line, -1) {
				ref := line[loc[0]:loc[1]]
				if loc[1] < len(line) && isWordByte(line[loc[1]]) {
					continue // not a document: ".mdx", "x.md5"
				}
				if strings.Contains(ref, "://") || strings.HasPrefix(ref, "/") || ref == ".md" {
					continue // a web address, an absolute path or a bare suffix (".md files")
				}
				file, anchor, _ := strings.Cut(ref, "#")
				var doc string
				for _, base := range []string{dir, ".", "docs"} {
					if c := filepath.ToSlash(filepath.Clean(filepath.Join(base, file))); exists(c) {
						doc = c
						break
					}
				}
				checked++
				switch {
				case doc == "":
					bad = append(bad, fmt.Sprintf("%s: %s: no such document", at, ref))
				case anchor != "" && !anchorsOf(doc)[anchor]:
					bad = append(bad, fmt.Sprintf("%s: %s: %s has no heading #%s", at, ref, doc, anchor))
				}
			}
			if ext != ".md" {
				continue
			}
			for _, m := range sameFileLink.FindAllStringSubmatch(line, -1) {
				checked++
				if !anchorsOf(rel)[m[1]] {
					bad = append(bad, fmt.Sprintf("%s: #%s: %s has no such heading", at, m[1], rel))
				}
			}
		}
	})
	if checked < 100 {
		t.Fatalf("checked %d citations of documents: the scan missed the repository's text", checked)
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d citations of documents are broken:\n%s", len(bad), checked, strings.Join(bad, "\n"))
	}
}

func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// uncited matches what the repository's text must not cite: documents a reader of the
// repository does not have (an issue, a design or its sections; the docs and comments cite
// the repository's own docs instead), and a service marked "(planned)" or "(to come)".
var uncited = regexp.MustCompile(`(?i)\bthe issue\b|\bissue #?[0-9]+|\bthe design\b|design §|\((planned|to come)\)`)

// TestTextCitesOnlyTheRepository: no doc, comment or message cites a document the repository
// lacks (uncited).
func TestTextCitesOnlyTheRepository(t *testing.T) {
	var bad []string
	walkText(t, "..", func(rel, _ string, lines []string) {
		if rel == "devstack/doclinks_test.go" {
			return // uncited itself
		}
		for i, line := range lines {
			if m := uncited.FindString(line); m != "" {
				bad = append(bad, fmt.Sprintf("%s:%d: %q", rel, i+1, m))
			}
		}
	})
	if len(bad) > 0 {
		t.Errorf("text that cites what the repository lacks:\n%s", strings.Join(bad, "\n"))
	}
}

// walkText calls f with the lines of every doc, Go file and manifest (.md, .go, .yaml, .yml)
// under root but hidden folders, testdata and node_modules; rel is the file's slash path from
// root, ext its extension.
func walkText(t *testing.T, root string, f func(rel, ext string, lines []string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(name)
		if ext != ".go" && ext != ".md" && ext != ".yaml" && ext != ".yml" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		f(filepath.ToSlash(rel), ext, strings.Split(string(b), "\n"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHeadingAnchors: headingAnchors follows GitHub's rules on the shapes of heading our docs use.
func TestHeadingAnchors(t *testing.T) {
	doc := strings.Join([]string{
		"# Delivery",
		"## Retries",
		"## Retry tiers (`webhooks.retry.<delay>`)",
		"### Isolation: a dead endpoint does not hold back the others",
		"## `SHRED_EVENTS` and [crypto-shredding](security.md#crypto-shredding)",
		"## Retries",
		"## Retries",
		"```sh",
		"# not a heading",
		"```",
		"## Données, 2–3 ×",
		`<a id="custom-anchor"></a>`,
		"## Trailing hashes ##",
		"####### seven hashes is no heading",
		"#no-space",
	}, "\n")
	got := headingAnchors(doc)
	want := []string{
		"delivery", "retries", "retry-tiers-webhooksretrydelay",
		"isolation-a-dead-endpoint-does-not-hold-back-the-others",
		"shred_events-and-crypto-shredding", "retries-1", "retries-2",
		"données-23-", "custom-anchor", "trailing-hashes",
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("anchors:\n got %q\nwant %q", keys, want)
	}
}

var (
	atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// slugDrop is what GitHub drops from a heading's text: anything but letters, marks,
	// numbers, connector punctuation (the underscore), spaces and hyphens.
	slugDrop = regexp.MustCompile(`[^\p{L}\p{M}\p{N}\p{Pc} -]`)
)

// headingAnchors returns the anchors of a markdown document's headings the way GitHub makes
// them: the heading's text (links by their text) lower-cased, without punctuation but
// hyphens and underscores, spaces turned into hyphens, and "-1", "-2"... added to repeats;
// plus the ids and names of its HTML anchors. Headings inside code fences do not count.
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		case strings.HasPrefix(trimmed, "```"):
			fence = "```"
			continue
		case strings.HasPrefix(trimmed, "~~~"):
			fence = "~~~"
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := mdLink.ReplaceAllString(m[2], "$1")
		slug := strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(text), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}
