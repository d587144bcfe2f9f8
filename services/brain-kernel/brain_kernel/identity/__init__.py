"""Project identity: resolution, sessions, git facts, projects, pins."""
