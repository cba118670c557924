import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The number of users, kept exact by triggers, so the unfiltered user list reads its total from one
 * row (users.service.ts): `COUNT(*)` of 100,000 users took 10–16 ms here, more than the page itself.
 *
 * - Statement-level triggers add or subtract the rows a statement inserted or deleted (transition
 *   tables), and set 0 on TRUNCATE. A statement that changed no row does not touch the count.
 * - Concurrent writers queue on the count row until the first commits; under READ COMMITTED the
 *   second re-reads it, so no change is lost. A reader sees the count of the transactions committed
 *   when its statement began, as `COUNT(*)` would.
 * - The table is locked against writes while the count is first taken, so no user is missed between
 *   counting and the triggers.
 */
export class UserCount1795410000000 implements MigrationInterface {
  name = 'UserCount1795410000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "user_count" ("one" boolean PRIMARY KEY DEFAULT true CHECK ("one"), "n" bigint NOT NULL)`,
    );
    await queryRunner.query(`LOCK TABLE "users" IN SHARE MODE`);
    await queryRunner.query(`INSERT INTO "user_count" ("n") SELECT COUNT(*) FROM "users"`);
    await queryRunner.query(`
      CREATE FUNCTION "user_count_follow"() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        changed bigint;
      BEGIN
        IF TG_OP = 'TRUNCATE' THEN
          UPDATE "user_count" SET "n" = 0;
          RETURN NULL;
        END IF;
        SELECT COUNT(*) INTO changed FROM "changed_rows";
        IF changed > 0 THEN
          UPDATE "user_count" SET "n" = "n" + CASE WHEN TG_OP = 'INSERT' THEN changed ELSE -changed END;
        END IF;
        RETURN NULL;
      END $$`);
    await queryRunner.query(
      `CREATE TRIGGER "user_count_insert" AFTER INSERT ON "users" REFERENCING NEW TABLE AS "changed_rows"
         FOR EACH STATEMENT EXECUTE FUNCTION "user_count_follow"()`,
    );
    await queryRunner.query(
      `CREATE TRIGGER "user_count_delete" AFTER DELETE ON "users" REFERENCING OLD TABLE AS "changed_rows"
         FOR EACH STATEMENT EXECUTE FUNCTION "user_count_follow"()`,
    );
    await queryRunner.query(
      `CREATE TRIGGER "user_count_truncate" AFTER TRUNCATE ON "users" FOR EACH STATEMENT EXECUTE FUNCTION "user_count_follow"()`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER "user_count_truncate" ON "users"`);
    await queryRunner.query(`DROP TRIGGER "user_count_delete" ON "users"`);
    await queryRunner.query(`DROP TRIGGER "user_count_insert" ON "users"`);
    await queryRunner.query(`DROP FUNCTION "user_count_follow"()`);
    await queryRunner.query(`DROP TABLE "user_count"`);
  }
}
