package edge

// CacheEntries is how many codes (positive and negative) the redirect cache
// holds now.
func (s *Server) CacheEntries() int64 {
	if s.cache == nil {
		return 0
	}
	return s.cache.len()
}
