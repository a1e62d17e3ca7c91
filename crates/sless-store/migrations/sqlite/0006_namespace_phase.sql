-- A namespace being deleted is `Terminating`: nothing may be written into it meanwhile.
ALTER TABLE namespaces ADD COLUMN phase TEXT NOT NULL DEFAULT 'Active';
