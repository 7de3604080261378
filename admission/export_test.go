package admission

// Wait waits for the cache's loads and background reloads under way.
func (c *KeyCache) Wait() { c.wg.Wait() }
