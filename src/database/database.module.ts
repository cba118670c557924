import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { dataSourceOptions } from './data-source.js';
import { LeaseEntity } from './lease.entity.js';
import { Leases } from './leases.js';
import { LocalWrites } from './local-writes.js';
import { Transactions } from './transactions.js';

@Global()
@Module({
  imports: [
    TypeOrmModule.forRootAsync({
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => ({ ...dataSourceOptions(config), migrationsRun: true }),
    }),
    TypeOrmModule.forFeature([LeaseEntity]),
  ],
  providers: [Transactions, Leases, LocalWrites],
  exports: [Transactions, Leases, LocalWrites],
})
export class DatabaseModule {}
