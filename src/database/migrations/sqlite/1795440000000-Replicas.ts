import { MigrationInterface, QueryRunner } from 'typeorm';

/** Replicas' internal addresses, so that a resumed terminal session reaches the replica holding it. */
export class Replicas1795440000000 implements MigrationInterface {
  name = 'Replicas1795440000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "replicas" ("id" varchar(16) PRIMARY KEY NOT NULL, "url" varchar(512) NOT NULL, "expires_at" datetime NOT NULL)`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "replicas"`);
  }
}
