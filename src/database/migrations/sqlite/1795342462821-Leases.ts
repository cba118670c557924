import { MigrationInterface, QueryRunner } from 'typeorm';

export class Leases1795342462821 implements MigrationInterface {
  name = 'Leases1795342462821';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "leases" ("name" varchar(64) PRIMARY KEY NOT NULL, "holder" varchar(64), "expires_at" datetime NOT NULL)`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "leases"`);
  }
}
