package clickhouse

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// schemaOf lists the database's tables with their CREATE statements.
func schemaOf(t *testing.T, c *Client) []string {
	t.Helper()
	r, err := c.Query(testCtx(t), "SELECT name, create_table_query FROM system.tables WHERE database = "+String(c.Database())+" ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, row := range r.Data {
		out = append(out, string(row[0])+" "+string(row[1]))
	}
	return out
}

func TestMigrateTwiceIsANoop(t *testing.T) {
	c := newClient(t, sharedServer(t)) // migrated once
	before := schemaOf(t, c)
	var names []string
	for _, s := range before {
		names = append(names, s[:slices.Index([]byte(s), ' ')])
	}
	if want := []string{`"drop_tallies"`, `"events"`, `"link_day_rows"`, `"link_days"`, `"link_rows"`, `"link_units"`, `"retired_clicks"`, `"schema_migrations"`, `"segments"`, `"site_days"`, `"site_dirty"`, `"site_open_visits"`, `"site_rows"`, `"site_units"`}; !slices.Equal(names, want) {
		t.Fatalf("tables after migrating = %v; want %v", names, want)
	}
	applied, err := c.Migrate(testCtx(t))
	if err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if len(applied) != 0 {
		t.Errorf("second Migrate applied %v; want nothing", applied)
	}
	if after := schemaOf(t, c); !slices.Equal(before, after) {
		t.Errorf("schema changed on the second run:\n%v\n%v", before, after)
	}
	r, err := c.Query(testCtx(t), "SELECT count(), uniqExact(version) FROM schema_migrations")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := rawValue(r.Data[0][0]).int(); n != int64(len(migrations)) {
		t.Errorf("%d migration rows; want one per migration (%d)", n, len(migrations))
	}
}

func TestMigrateRefusesANewerSchema(t *testing.T) {
	c := newClient(t, sharedServer(t))
	if err := c.Exec(testCtx(t), "INSERT INTO schema_migrations (version, name, applied) VALUES (9999, 'from the future', now())"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Migrate(testCtx(t)); !errors.Is(err, ErrSchemaNewer) {
		t.Errorf("Migrate over a newer schema: %v; want ErrSchemaNewer", err)
	}
}

// A database migrated by a binary that knew migrations up to 3 gets 4
// and 5 (the site and link rows) from this one, once; the schema is then
// the fresh one's.
func TestMigrateAddsTheRowTables(t *testing.T) {
	srv := sharedServer(t)
	fresh := schemaOf(t, newClient(t, srv))
	all := migrations
	migrations = all[:3]
	c := newClient(t, srv) // migrated to 3
	migrations = all
	if names := schemaOf(t, c); len(names) != 5 {
		t.Fatalf("after migrations 1-3: %d tables; want 5", len(names))
	}
	applied, err := c.Migrate(testCtx(t))
	if err != nil || !slices.Equal(applied, []uint32{4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("Migrate over version 3: %v, %v; want [4 5 6 7 8 9 10]", applied, err)
	}
	if applied, err = c.Migrate(testCtx(t)); err != nil || len(applied) != 0 {
		t.Errorf("Migrate again: %v, %v; want nothing", applied, err)
	}
	strip := func(s []string) []string { // the database's name is in each statement
		out := make([]string, len(s))
		for i, x := range s {
			out[i] = x[:strings.Index(x, " ")] + x[strings.Index(x, ".")+1:]
		}
		return out
	}
	if got := schemaOf(t, c); !slices.Equal(strip(got), strip(fresh)) {
		t.Errorf("schema after 4 and 5:\n%v\nwant the fresh one's:\n%v", got, fresh)
	}
}
