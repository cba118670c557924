import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Roles `admin` and `viewer` exist from the first start; lock rows serialise multi-row invariants. */
export class SeedRolesAndLocks1795340070000 implements MigrationInterface {
  name = 'SeedRolesAndLocks1795340070000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `INSERT INTO "roles" ("name", "description") VALUES ('admin', 'Every route: users, clusters, API keys, and reading and writing cluster resources'), ('viewer', 'Reading cluster resources, except Secrets')`,
    );
    await queryRunner.query(`INSERT INTO "app_locks" ("name", "version") VALUES ('users', 0), ('clusters', 0)`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DELETE FROM "app_locks" WHERE "name" IN ('users', 'clusters')`);
    await queryRunner.query(`DELETE FROM "roles" WHERE "name" IN ('admin', 'viewer')`);
  }
}
