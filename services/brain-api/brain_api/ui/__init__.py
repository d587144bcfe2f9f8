"""The operator pages at ``/ui`` (ADR 0049): server-rendered views of the index under the API's auth and scope rules."""
