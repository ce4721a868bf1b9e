"""Planning a run: topology choice, worker and engine layout, memory and resource estimates."""
