import { MigrationInterface, QueryRunner } from 'typeorm';

export class Init1795340060761 implements MigrationInterface {
  name = 'Init1795340060761';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "roles" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "name" varchar(32) NOT NULL, "description" varchar(200) NOT NULL DEFAULT (''), CONSTRAINT "UQ_648e3f5447f725579d7d4ffdfb7" UNIQUE ("name"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "api_keys" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "name" varchar(100) NOT NULL, "name_key" varchar(100) NOT NULL, "role_id" integer NOT NULL, "prefix" varchar(16) NOT NULL, "key_hash" varchar(64) NOT NULL, "created_at" datetime NOT NULL DEFAULT (datetime('now')), "created_by" varchar(110), "last_used_at" datetime, "expires_at" datetime, CONSTRAINT "UQ_ac92970f48723920521aedd0b8c" UNIQUE ("name_key"), CONSTRAINT "UQ_57384430aa1959f4578046c9b81" UNIQUE ("key_hash"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "login_throttle" ("key" varchar(200) PRIMARY KEY NOT NULL, "failures" integer NOT NULL, "window_started_at" datetime NOT NULL)`,
    );
    await queryRunner.query(
      `CREATE TABLE "users" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "username" varchar(64) NOT NULL, "username_key" varchar(64) NOT NULL, "provider" varchar(32) NOT NULL DEFAULT ('password'), "name" varchar(128) NOT NULL, "password_hash" varchar(255), "enabled" boolean NOT NULL DEFAULT (1), "avatar_url" varchar(2048), "last_login_at" datetime, "created_at" datetime NOT NULL DEFAULT (datetime('now')), "updated_at" datetime NOT NULL DEFAULT (datetime('now')), CONSTRAINT "UQ_43f388ec81c5e6e796845dad903" UNIQUE ("username_key"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "sessions" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "token_hash" varchar(64) NOT NULL, "user_id" integer NOT NULL, "created_at" datetime NOT NULL DEFAULT (datetime('now')), "last_seen_at" datetime NOT NULL, "expires_at" datetime NOT NULL, CONSTRAINT "UQ_abaa9e068cdd390bc5210f79884" UNIQUE ("token_hash"))`,
    );
    await queryRunner.query(`CREATE INDEX "idx_sessions_user" ON "sessions" ("user_id") `);
    await queryRunner.query(
      `CREATE TABLE "app_locks" ("name" varchar(64) PRIMARY KEY NOT NULL, "version" integer NOT NULL DEFAULT (0))`,
    );
    await queryRunner.query(
      `CREATE TABLE "user_roles" ("user_id" integer NOT NULL, "role_id" integer NOT NULL, PRIMARY KEY ("user_id", "role_id"))`,
    );
    await queryRunner.query(`CREATE INDEX "IDX_87b8888186ca9769c960e92687" ON "user_roles" ("user_id") `);
    await queryRunner.query(`CREATE INDEX "IDX_b23c65e50a758245a33ee35fda" ON "user_roles" ("role_id") `);
    await queryRunner.query(
      `CREATE TABLE "temporary_api_keys" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "name" varchar(100) NOT NULL, "name_key" varchar(100) NOT NULL, "role_id" integer NOT NULL, "prefix" varchar(16) NOT NULL, "key_hash" varchar(64) NOT NULL, "created_at" datetime NOT NULL DEFAULT (datetime('now')), "created_by" varchar(110), "last_used_at" datetime, "expires_at" datetime, CONSTRAINT "UQ_ac92970f48723920521aedd0b8c" UNIQUE ("name_key"), CONSTRAINT "UQ_57384430aa1959f4578046c9b81" UNIQUE ("key_hash"), CONSTRAINT "fk_api_keys_role" FOREIGN KEY ("role_id") REFERENCES "roles" ("id") ON DELETE RESTRICT ON UPDATE NO ACTION)`,
    );
    await queryRunner.query(
      `INSERT INTO "temporary_api_keys"("id", "name", "name_key", "role_id", "prefix", "key_hash", "created_at", "created_by", "last_used_at", "expires_at") SELECT "id", "name", "name_key", "role_id", "prefix", "key_hash", "created_at", "created_by", "last_used_at", "expires_at" FROM "api_keys"`,
    );
    await queryRunner.query(`DROP TABLE "api_keys"`);
    await queryRunner.query(`ALTER TABLE "temporary_api_keys" RENAME TO "api_keys"`);
    await queryRunner.query(`DROP INDEX "idx_sessions_user"`);
    await queryRunner.query(
      `CREATE TABLE "temporary_sessions" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "token_hash" varchar(64) NOT NULL, "user_id" integer NOT NULL, "created_at" datetime NOT NULL DEFAULT (datetime('now')), "last_seen_at" datetime NOT NULL, "expires_at" datetime NOT NULL, CONSTRAINT "UQ_abaa9e068cdd390bc5210f79884" UNIQUE ("token_hash"), CONSTRAINT "fk_sessions_user" FOREIGN KEY ("user_id") REFERENCES "users" ("id") ON DELETE CASCADE ON UPDATE NO ACTION)`,
    );
    await queryRunner.query(
      `INSERT INTO "temporary_sessions"("id", "token_hash", "user_id", "created_at", "last_seen_at", "expires_at") SELECT "id", "token_hash", "user_id", "created_at", "last_seen_at", "expires_at" FROM "sessions"`,
    );
    await queryRunner.query(`DROP TABLE "sessions"`);
    await queryRunner.query(`ALTER TABLE "temporary_sessions" RENAME TO "sessions"`);
    await queryRunner.query(`CREATE INDEX "idx_sessions_user" ON "sessions" ("user_id") `);
    await queryRunner.query(`DROP INDEX "IDX_87b8888186ca9769c960e92687"`);
    await queryRunner.query(`DROP INDEX "IDX_b23c65e50a758245a33ee35fda"`);
    await queryRunner.query(
      `CREATE TABLE "temporary_user_roles" ("user_id" integer NOT NULL, "role_id" integer NOT NULL, CONSTRAINT "fk_user_roles_user" FOREIGN KEY ("user_id") REFERENCES "users" ("id") ON DELETE CASCADE ON UPDATE CASCADE, CONSTRAINT "fk_user_roles_role" FOREIGN KEY ("role_id") REFERENCES "roles" ("id") ON DELETE CASCADE ON UPDATE CASCADE, PRIMARY KEY ("user_id", "role_id"))`,
    );
    await queryRunner.query(
      `INSERT INTO "temporary_user_roles"("user_id", "role_id") SELECT "user_id", "role_id" FROM "user_roles"`,
    );
    await queryRunner.query(`DROP TABLE "user_roles"`);
    await queryRunner.query(`ALTER TABLE "temporary_user_roles" RENAME TO "user_roles"`);
    await queryRunner.query(`CREATE INDEX "IDX_87b8888186ca9769c960e92687" ON "user_roles" ("user_id") `);
    await queryRunner.query(`CREATE INDEX "IDX_b23c65e50a758245a33ee35fda" ON "user_roles" ("role_id") `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "IDX_b23c65e50a758245a33ee35fda"`);
    await queryRunner.query(`DROP INDEX "IDX_87b8888186ca9769c960e92687"`);
    await queryRunner.query(`ALTER TABLE "user_roles" RENAME TO "temporary_user_roles"`);
    await queryRunner.query(
      `CREATE TABLE "user_roles" ("user_id" integer NOT NULL, "role_id" integer NOT NULL, PRIMARY KEY ("user_id", "role_id"))`,
    );
    await queryRunner.query(
      `INSERT INTO "user_roles"("user_id", "role_id") SELECT "user_id", "role_id" FROM "temporary_user_roles"`,
    );
    await queryRunner.query(`DROP TABLE "temporary_user_roles"`);
    await queryRunner.query(`CREATE INDEX "IDX_b23c65e50a758245a33ee35fda" ON "user_roles" ("role_id") `);
    await queryRunner.query(`CREATE INDEX "IDX_87b8888186ca9769c960e92687" ON "user_roles" ("user_id") `);
    await queryRunner.query(`DROP INDEX "idx_sessions_user"`);
    await queryRunner.query(`ALTER TABLE "sessions" RENAME TO "temporary_sessions"`);
    await queryRunner.query(
      `CREATE TABLE "sessions" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "token_hash" varchar(64) NOT NULL, "user_id" integer NOT NULL, "created_at" datetime NOT NULL DEFAULT (datetime('now')), "last_seen_at" datetime NOT NULL, "expires_at" datetime NOT NULL, CONSTRAINT "UQ_abaa9e068cdd390bc5210f79884" UNIQUE ("token_hash"))`,
    );
    await queryRunner.query(
      `INSERT INTO "sessions"("id", "token_hash", "user_id", "created_at", "last_seen_at", "expires_at") SELECT "id", "token_hash", "user_id", "created_at", "last_seen_at", "expires_at" FROM "temporary_sessions"`,
    );
    await queryRunner.query(`DROP TABLE "temporary_sessions"`);
    await queryRunner.query(`CREATE INDEX "idx_sessions_user" ON "sessions" ("user_id") `);
    await queryRunner.query(`ALTER TABLE "api_keys" RENAME TO "temporary_api_keys"`);
    await queryRunner.query(
      `CREATE TABLE "api_keys" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "name" varchar(100) NOT NULL, "name_key" varchar(100) NOT NULL, "role_id" integer NOT NULL, "prefix" varchar(16) NOT NULL, "key_hash" varchar(64) NOT NULL, "created_at" datetime NOT NULL DEFAULT (datetime('now')), "created_by" varchar(110), "last_used_at" datetime, "expires_at" datetime, CONSTRAINT "UQ_ac92970f48723920521aedd0b8c" UNIQUE ("name_key"), CONSTRAINT "UQ_57384430aa1959f4578046c9b81" UNIQUE ("key_hash"))`,
    );
    await queryRunner.query(
      `INSERT INTO "api_keys"("id", "name", "name_key", "role_id", "prefix", "key_hash", "created_at", "created_by", "last_used_at", "expires_at") SELECT "id", "name", "name_key", "role_id", "prefix", "key_hash", "created_at", "created_by", "last_used_at", "expires_at" FROM "temporary_api_keys"`,
    );
    await queryRunner.query(`DROP TABLE "temporary_api_keys"`);
    await queryRunner.query(`DROP INDEX "IDX_b23c65e50a758245a33ee35fda"`);
    await queryRunner.query(`DROP INDEX "IDX_87b8888186ca9769c960e92687"`);
    await queryRunner.query(`DROP TABLE "user_roles"`);
    await queryRunner.query(`DROP TABLE "app_locks"`);
    await queryRunner.query(`DROP INDEX "idx_sessions_user"`);
    await queryRunner.query(`DROP TABLE "sessions"`);
    await queryRunner.query(`DROP TABLE "users"`);
    await queryRunner.query(`DROP TABLE "login_throttle"`);
    await queryRunner.query(`DROP TABLE "api_keys"`);
    await queryRunner.query(`DROP TABLE "roles"`);
  }
}
