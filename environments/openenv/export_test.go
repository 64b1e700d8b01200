package openenv

// ActionField is the action field of the schema r's episodes validate
// against ("" before any was read).
func (r *Remote) ActionField() string {
	r.pool.mu.Lock()
	defer r.pool.mu.Unlock()
	if r.pool.schema == nil {
		return ""
	}
	return r.pool.schema.field
}
