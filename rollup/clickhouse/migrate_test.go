package clickhouse

import (
	"errors"
	"slices"
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
	if want := []string{`"drop_tallies"`, `"events"`, `"link_rows"`, `"link_units"`, `"retired_clicks"`, `"schema_migrations"`, `"segments"`, `"site_rows"`, `"site_units"`}; !slices.Equal(names, want) {
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
