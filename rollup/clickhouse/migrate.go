package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrSchemaNewer means the database records a migration this binary does
// not know: a newer Waymark migrated it, and this one must not write.
var ErrSchemaNewer = errors.New("clickhouse schema is newer than this binary")

// Migrate creates the database if needed and applies, in order, every
// migration it has not recorded, recording each once its statements
// succeeded. It returns the versions it applied: none when the schema is
// current, so running it twice is a no-op.
func (c *Client) Migrate(ctx context.Context) ([]uint32, error) {
	// The database itself must exist before a request may name it.
	if err := c.withDatabase("default").Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+c.db); err != nil {
		return nil, fmt.Errorf("cannot create database %s: %w", c.db, err)
	}
	if err := c.Exec(ctx, migrationsTable); err != nil {
		return nil, fmt.Errorf("cannot create the migrations table: %w", err)
	}
	done, err := c.appliedMigrations(ctx)
	if err != nil {
		return nil, err
	}
	latest := migrations[len(migrations)-1].version
	for v := range done {
		if v > latest {
			return nil, fmt.Errorf("%w: it has migration %d, this binary knows up to %d", ErrSchemaNewer, v, latest)
		}
	}
	var applied []uint32
	for _, m := range migrations {
		if done[m.version] {
			continue
		}
		for _, stmt := range m.statements {
			if err := c.Exec(ctx, stmt); err != nil && !alreadyApplied(m.version, err) {
				return applied, fmt.Errorf("cannot apply migration %d (%s): %w", m.version, m.name, err)
			}
		}
		rec := fmt.Sprintf("INSERT INTO schema_migrations (version, name, applied) VALUES (%d, %s, %s)",
			m.version, String(m.name), DateTime(time.Now()))
		if err := c.Exec(ctx, rec); err != nil {
			return applied, fmt.Errorf("cannot record migration %d: %w", m.version, err)
		}
		applied = append(applied, m.version)
	}
	return applied, nil
}

func (c *Client) appliedMigrations(ctx context.Context) (map[uint32]bool, error) {
	r, err := c.Query(ctx, "SELECT DISTINCT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("cannot read applied migrations: %w", err)
	}
	done := make(map[uint32]bool, len(r.Data))
	for _, row := range r.Data {
		v, err := strconv.ParseUint(strings.Trim(string(row[0]), `"`), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("cannot read migration version %s: %w", row[0], err)
		}
		done[uint32(v)] = true
	}
	return done, nil
}

// withDatabase is a copy of c whose requests name database db.
func (c *Client) withDatabase(db string) *Client {
	d := *c
	d.db = db
	return &d
}
