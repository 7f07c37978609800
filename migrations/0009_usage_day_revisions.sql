-- The revision of a stored day's totals, as the key's quota object numbered them: a write
-- replaces the stored totals only when it is at least as recent, so totals that went down (a
-- lease's unused permits handed back) are stored, and an older write that arrives late is not.
-- Rows written before this migration have revision 0: any write of the object replaces them.
ALTER TABLE key_usage_days ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
