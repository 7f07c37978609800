-- The audit trail's request_id is the service's own id of the request (the one its log lines
-- carry); the X-Request-Id the client sent, if any, is kept beside it, marked as the client's.
ALTER TABLE audit_log ADD COLUMN client_request_id TEXT;
