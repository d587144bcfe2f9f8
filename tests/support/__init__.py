"""The shared test harness: settings, servers, planting, git repositories, stubs (bench imports it; it imports no bench)."""
