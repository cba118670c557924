import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The user list stays fast with many users: a trigram full-text index finds substrings of usernames
 * and names without scanning the table (kept in step with `users` by triggers), and indexes serve
 * each sort order. A later migration that rebuilds `users` (SQLite's way to alter a column) must
 * create these triggers again.
 */
export class UserListIndexes1795353245680 implements MigrationInterface {
  name = 'UserListIndexes1795353245680';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE VIRTUAL TABLE "users_search" USING fts5(username, name, content='users', content_rowid='id', tokenize='trigram')`,
    );
    await queryRunner.query(
      `INSERT INTO "users_search" (rowid, username, name) SELECT id, username, name FROM "users"`,
    );
    await queryRunner.query(
      `CREATE TRIGGER "users_search_insert" AFTER INSERT ON "users" BEGIN
         INSERT INTO "users_search" (rowid, username, name) VALUES (new.id, new.username, new.name);
       END`,
    );
    await queryRunner.query(
      `CREATE TRIGGER "users_search_delete" AFTER DELETE ON "users" BEGIN
         INSERT INTO "users_search" ("users_search", rowid, username, name) VALUES ('delete', old.id, old.username, old.name);
       END`,
    );
    await queryRunner.query(
      `CREATE TRIGGER "users_search_update" AFTER UPDATE OF username, name ON "users" BEGIN
         INSERT INTO "users_search" ("users_search", rowid, username, name) VALUES ('delete', old.id, old.username, old.name);
         INSERT INTO "users_search" (rowid, username, name) VALUES (new.id, new.username, new.name);
       END`,
    );
    await queryRunner.query(`CREATE INDEX "idx_users_name_sort" ON "users" (lower("name"), "id")`);
    await queryRunner.query(`CREATE INDEX "idx_users_created_sort" ON "users" ("created_at", "id")`);
    await queryRunner.query(`CREATE INDEX "idx_users_last_login_sort" ON "users" ("last_login_at", "id")`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    for (const index of ['idx_users_last_login_sort', 'idx_users_created_sort', 'idx_users_name_sort'])
      await queryRunner.query(`DROP INDEX "${index}"`);
    for (const trigger of ['users_search_update', 'users_search_delete', 'users_search_insert'])
      await queryRunner.query(`DROP TRIGGER "${trigger}"`);
    await queryRunner.query(`DROP TABLE "users_search"`);
  }
}
