import { MigrationInterface, QueryRunner } from 'typeorm';

export class Init1795340064051 implements MigrationInterface {
  name = 'Init1795340064051';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "roles" ("id" SERIAL NOT NULL, "name" character varying(32) NOT NULL, "description" character varying(200) NOT NULL DEFAULT '', CONSTRAINT "UQ_648e3f5447f725579d7d4ffdfb7" UNIQUE ("name"), CONSTRAINT "PK_c1433d71a4838793a49dcad46ab" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "api_keys" ("id" SERIAL NOT NULL, "name" character varying(100) NOT NULL, "name_key" character varying(100) NOT NULL, "role_id" integer NOT NULL, "prefix" character varying(16) NOT NULL, "key_hash" character varying(64) NOT NULL, "created_at" TIMESTAMP NOT NULL DEFAULT now(), "created_by" character varying(110), "last_used_at" TIMESTAMP, "expires_at" TIMESTAMP, CONSTRAINT "UQ_ac92970f48723920521aedd0b8c" UNIQUE ("name_key"), CONSTRAINT "UQ_57384430aa1959f4578046c9b81" UNIQUE ("key_hash"), CONSTRAINT "PK_5c8a79801b44bd27b79228e1dad" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "login_throttle" ("key" character varying(200) NOT NULL, "failures" integer NOT NULL, "window_started_at" TIMESTAMP NOT NULL, CONSTRAINT "PK_14c03bac82292a8310c54cb98d0" PRIMARY KEY ("key"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "users" ("id" SERIAL NOT NULL, "username" character varying(64) NOT NULL, "username_key" character varying(64) NOT NULL, "provider" character varying(32) NOT NULL DEFAULT 'password', "name" character varying(128) NOT NULL, "password_hash" character varying(255), "enabled" boolean NOT NULL DEFAULT true, "avatar_url" character varying(2048), "last_login_at" TIMESTAMP, "created_at" TIMESTAMP NOT NULL DEFAULT now(), "updated_at" TIMESTAMP NOT NULL DEFAULT now(), CONSTRAINT "UQ_43f388ec81c5e6e796845dad903" UNIQUE ("username_key"), CONSTRAINT "PK_a3ffb1c0c8416b9fc6f907b7433" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "sessions" ("id" SERIAL NOT NULL, "token_hash" character varying(64) NOT NULL, "user_id" integer NOT NULL, "created_at" TIMESTAMP NOT NULL DEFAULT now(), "last_seen_at" TIMESTAMP NOT NULL, "expires_at" TIMESTAMP NOT NULL, CONSTRAINT "UQ_abaa9e068cdd390bc5210f79884" UNIQUE ("token_hash"), CONSTRAINT "PK_3238ef96f18b355b671619111bc" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(`CREATE INDEX "idx_sessions_user" ON "sessions"  ("user_id") `);
    await queryRunner.query(
      `CREATE TABLE "app_locks" ("name" character varying(64) NOT NULL, "version" integer NOT NULL DEFAULT '0', CONSTRAINT "PK_f536d2997e857f653ae39c96a56" PRIMARY KEY ("name"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "user_roles" ("user_id" integer NOT NULL, "role_id" integer NOT NULL, CONSTRAINT "PK_23ed6f04fe43066df08379fd034" PRIMARY KEY ("user_id", "role_id"))`,
    );
    await queryRunner.query(`CREATE INDEX "IDX_87b8888186ca9769c960e92687" ON "user_roles"  ("user_id") `);
    await queryRunner.query(`CREATE INDEX "IDX_b23c65e50a758245a33ee35fda" ON "user_roles"  ("role_id") `);
    await queryRunner.query(
      `ALTER TABLE "api_keys" ADD CONSTRAINT "fk_api_keys_role" FOREIGN KEY ("role_id") REFERENCES "roles"("id") ON DELETE RESTRICT ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "sessions" ADD CONSTRAINT "fk_sessions_user" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "user_roles" ADD CONSTRAINT "fk_user_roles_user" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE`,
    );
    await queryRunner.query(
      `ALTER TABLE "user_roles" ADD CONSTRAINT "fk_user_roles_role" FOREIGN KEY ("role_id") REFERENCES "roles"("id") ON DELETE CASCADE ON UPDATE CASCADE`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "user_roles" DROP CONSTRAINT "fk_user_roles_role"`);
    await queryRunner.query(`ALTER TABLE "user_roles" DROP CONSTRAINT "fk_user_roles_user"`);
    await queryRunner.query(`ALTER TABLE "sessions" DROP CONSTRAINT "fk_sessions_user"`);
    await queryRunner.query(`ALTER TABLE "api_keys" DROP CONSTRAINT "fk_api_keys_role"`);
    await queryRunner.query(`DROP INDEX "public"."IDX_b23c65e50a758245a33ee35fda"`);
    await queryRunner.query(`DROP INDEX "public"."IDX_87b8888186ca9769c960e92687"`);
    await queryRunner.query(`DROP TABLE "user_roles"`);
    await queryRunner.query(`DROP TABLE "app_locks"`);
    await queryRunner.query(`DROP INDEX "public"."idx_sessions_user"`);
    await queryRunner.query(`DROP TABLE "sessions"`);
    await queryRunner.query(`DROP TABLE "users"`);
    await queryRunner.query(`DROP TABLE "login_throttle"`);
    await queryRunner.query(`DROP TABLE "api_keys"`);
    await queryRunner.query(`DROP TABLE "roles"`);
  }
}
