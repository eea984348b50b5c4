package harness

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// clusterKeySize is the length of a decoded `waymark keygen` key.
const clusterKeySize = 32

// DeriveInternalToken returns the bearer token that nodes of a cluster
// present to each other's /internal/ endpoints, from the base64 cluster key
// `waymark keygen` prints. It mirrors node/internal.go (HMAC-SHA256 of
// "waymark/internal-v1" keyed by the cluster key); if the node changes the
// derivation, Cluster.Replica fails with status 401 and this must follow.
func DeriveInternalToken(clusterKey string) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(clusterKey))
	if err != nil || len(key) != clusterKeySize {
		return "", fmt.Errorf("cannot derive internal token: the cluster key must be %d bytes of base64", clusterKeySize)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("waymark/internal-v1"))
	return hex.EncodeToString(m.Sum(nil)), nil
}
