// SQL for the PostgreSQL repository tests: a deferred constraint trigger that
// fails the COMMIT of any transaction that inserted a fault with code 'boom'
// (the backend then retries each write of the group alone).
#pragma once

namespace vend::test {

inline constexpr const char* kBoomAtCommitSql =
    "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF NEW.code = 'boom' THEN RAISE EXCEPTION 'boom at commit'; END IF; "
    "RETURN NULL; END $$; "
    "CREATE CONSTRAINT TRIGGER boom AFTER INSERT ON faults DEFERRABLE INITIALLY "
    "DEFERRED FOR EACH ROW EXECUTE FUNCTION boom()";

}  // namespace vend::test
